import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import type { NotaryService } from './service.ts';
import { AnchorFieldSchema } from '../anchors/schemas.ts';

const Sha256 = z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be a sha256 digest: 64 hex digits');
const NotaryReceipt = z.object({
  id: z.string(),
  object: z.literal('notary.receipt'),
  input_sha256: z.string(),
  output_sha256: z.string(),
  label: z.string().nullable(),
  cost_micro_usd: z.number(),
  created_at: z.string(),
  receipt: z.object({ payload: z.record(z.string(), z.unknown()), hash: z.string(), signature: z.string(), signer: z.string() }),
  anchor: AnchorFieldSchema,
});

export function notaryRoutes(app: FastifyInstance, notary: NotaryService, publicUrl: URL): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];

  r.post(
    '/v1/notary/receipts',
    {
      config: { auth: 'key', scope: 'proofs', billable: true },
      schema: {
        tags,
        summary: 'Register input and output fingerprints of outside work; billed per receipt; every call mints and bills anew',
        body: z.object({ input_sha256: Sha256, output_sha256: Sha256, label: z.string().max(200).optional() }).strict(),
        response: { 201: NotaryReceipt },
      },
    },
    async (req, reply) => {
      const settled = await notary.register(requireKey(req), req.body, {
        requestId: req.id,
        runId: runIdOf(req),
        resource: new URL('/v1/notary/receipts', publicUrl).toString(),
      });
      setReceiptHeaders(reply, settled.receipt);
      const rc = settled.receipt;
      return reply.code(201).send(await notary.view({ id: rc.payload.id, payload: rc.canonical, hash: rc.hash, signature: rc.signature, created_at: new Date(rc.payload.created_at) }));
    },
  );

  r.get(
    '/v1/notary/receipts',
    { config: { auth: 'key', scope: 'proofs' }, schema: { tags, summary: 'Your registrations, newest first (200 most recent)', response: { 200: z.object({ receipts: z.array(NotaryReceipt) }) } } },
    async (req) => ({ receipts: await notary.list(requireKey(req).accountId) }),
  );

  r.get(
    '/v1/notary/receipts/:id',
    { config: { auth: 'key', scope: 'proofs' }, schema: { tags, summary: 'One registration with signature and anchor state', params: z.object({ id: z.string().max(64) }), response: { 200: NotaryReceipt } } },
    async (req) => notary.get(requireKey(req).accountId, req.params.id),
  );
}
