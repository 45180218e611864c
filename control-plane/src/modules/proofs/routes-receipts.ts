import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RECEIPT_HEADERS, verifyReceipt } from '@svc/shared';
import { requireSession } from '../../http/auth.ts';
import { renderBadge } from './badge.ts';
import { publicBase, type ProofsDeps } from './deps.ts';
import { checkReceipt } from './integrity.ts';
import { Receipts } from './receipts.ts';
import { IdParams, Pubkey, ReceiptView, ShareState, SharedReceiptView, VerifyBody, VerifyResult } from './schemas.ts';

export function receiptsRoutes(app: FastifyInstance, deps: ProofsDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];
  const signer = deps.signer.address;
  const receipts = new Receipts(deps.db, deps.clock, signer, publicBase(deps.publicUrl));

  r.get(
    '/v1/receipts/pubkey',
    { config: { auth: 'public' }, schema: { tags, summary: 'Receipt-signer address (secp256k1) and scheme', response: { 200: Pubkey } } },
    async () => ({
      address: signer,
      scheme: 'eip191-personal_sign' as const,
      curve: 'secp256k1' as const,
      canonicalization: 'RFC 8785' as const,
      hash: 'sha256 of the canonical JSON, 0x-hex',
      headers: { ...RECEIPT_HEADERS },
    }),
  );

  r.post(
    '/v1/receipts/verify',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Verify a receipt signature (EIP-191) against the receipt signer; anything malformed is simply not valid',
        body: VerifyBody,
        response: { 200: VerifyResult },
      },
    },
    async (req) => {
      const v = verifyReceipt(req.body.receipt, req.body.signature, signer);
      return { valid: v.valid, recovered_address: v.recovered_address, payload: v.payload ?? null };
    },
  );

  r.get(
    '/v1/receipts/shared/:id',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'A receipt its owner shared (page /r/{id}); unshared and unknown ids are the same 404',
        params: IdParams,
        response: { 200: SharedReceiptView },
      },
    },
    async (req) => receipts.publicView(await receipts.shared(req.params.id)),
  );

  r.get(
    '/v1/receipts/:id/badge.svg',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Live SVG badge of a shared receipt: re-verified on every request; unshared and unknown ids are the same 404',
        params: IdParams,
        response: { 200: z.string().describe('image/svg+xml') },
      },
    },
    async (req, reply) => {
      const row = await receipts.shared(req.params.id);
      const c = checkReceipt(row, signer);
      const cost = c.payload?.cost_micro_usd;
      const svg = renderBadge({ verified: c.valid, kind: row.kind, costMicroUsd: typeof cost === 'number' && Number.isSafeInteger(cost) ? cost : null });
      return reply
        .header('cache-control', 'no-cache')
        .header('x-content-type-options', 'nosniff')
        .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
        .type('image/svg+xml; charset=utf-8')
        .send(svg);
    },
  );

  r.get(
    '/v1/receipts/:id',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Re-fetch one of your receipts by request id or usage-event id', params: IdParams, response: { 200: ReceiptView } },
    },
    async (req) => receipts.view(await receipts.owned(requireSession(req).accountId, req.params.id)),
  );

  r.post(
    '/v1/receipts/:id/share',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Opt into public fetchability (GET /v1/receipts/shared/{id}, page /r/{id}); idempotent', params: IdParams, response: { 200: ShareState } },
    },
    async (req) => receipts.setShared(requireSession(req).accountId, req.params.id, true),
  );

  r.delete(
    '/v1/receipts/:id/share',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Opt out of public fetchability; idempotent', params: IdParams, response: { 200: ShareState } },
    },
    async (req) => receipts.setShared(requireSession(req).accountId, req.params.id, false),
  );
}
