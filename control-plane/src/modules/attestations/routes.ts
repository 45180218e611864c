import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { AssetParams, AttestationView, CheckBody, EvidenceQuery, EvidenceView, HistoryQuery, HistoryView, PublicVerification, RefreshBody } from './schemas.ts';
import type { AttestationsService } from './service.ts';

/**
 * Attestations (spec: assets): check and refresh (metered, one price whatever the result), the current
 * record, its history and evidence (free) with an API key (scope `proofs`); the public verification of an
 * asset from records whose every input is on chain.
 */
export function attestationsRoutes(app: FastifyInstance, svc: AttestationsService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['assets'];
  const key = { auth: 'key' as const, scope: 'proofs' as const };
  const billable = { ...key, billable: true };

  r.post(
    '/v1/attestations/check',
    {
      config: billable,
      schema: {
        tags,
        summary:
          'Verify facts about an ERC-20 on a configured chain (code hash, name, symbol, decimals, total supply, reserve balances, optionally an HTTPS reserve figure) read at a pinned block; stores the next signed version of your record of the asset with the sha256 and bytes of every answer; status VERIFIED, DISCREPANCY or UNAVAILABLE (a source unreachable or unconfigured). Metered at one price whatever the result; a change fires the matching attestation.* webhook. An unknown chain or an address without code is a 400 and nothing is written or charged',
        body: CheckBody,
        response: { 201: AttestationView },
      },
    },
    async (req, reply) => {
      const out = await svc.check(requireKey(req), req.body, { requestId: req.id, runId: runIdOf(req) });
      setReceiptHeaders(reply, out.receipt);
      return reply.code(201).send(out.view);
    },
  );

  r.get(
    '/v1/attestations/:asset_id',
    { config: key, schema: { tags, summary: "Your current record of the asset (asset id eip155:<chain id>:<address>); free; status recomputed against its freshness window (STALE past it); status_at_check keeps what the check found", params: AssetParams, response: { 200: AttestationView } } },
    async (req) => svc.current(requireKey(req).accountId, req.params.asset_id),
  );

  r.get(
    '/v1/attestations/:asset_id/history',
    { config: key, schema: { tags, summary: 'Every version as signed, newest first; ?limit= default 50, not clamped (200 is the supported ceiling); free', params: AssetParams, querystring: HistoryQuery, response: { 200: HistoryView } } },
    async (req) => svc.history(requireKey(req).accountId, req.params.asset_id, req.query.limit),
  );

  r.get(
    '/v1/attestations/:asset_id/evidence',
    {
      config: key,
      schema: { tags, summary: 'What each reading of a version asked, where, when, and the sha256 of the bytes answered; ?include_body=true returns the bytes (base64); ?version= picks a version (default current); free', params: AssetParams, querystring: EvidenceQuery, response: { 200: EvidenceView } },
    },
    async (req) => svc.evidence(requireKey(req).accountId, req.params.asset_id, req.query.version, req.query.include_body),
  );

  r.post(
    '/v1/attestations/:asset_id/refresh',
    {
      config: billable,
      schema: { tags, summary: 'Run the check of your current record again (optionally at another block): a new version supersedes it, prior versions kept; same price; a change fires the matching attestation.* webhook', params: AssetParams, body: RefreshBody, response: { 201: AttestationView } },
    },
    async (req, reply) => {
      const out = await svc.refresh(requireKey(req), req.params.asset_id, req.body.block_number, { requestId: req.id, runId: runIdOf(req) });
      setReceiptHeaders(reply, out.receipt);
      return reply.code(201).send(out.view);
    },
  );

  r.get(
    '/v1/assets/:asset_id/verification',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: "The newest attestation record of the asset, by anyone, whose every input is publicly re-readable on chain, unattributed, with its readings and signature. Records built on an HTTPS figure (an issuer declaration) or that read nothing answer the same 404 as an unknown asset",
        params: AssetParams,
        response: { 200: PublicVerification },
      },
    },
    async (req) => svc.publicVerification(req.params.asset_id),
  );
}
