import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { requireSession } from '../../http/auth.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { publicBase } from '../proofs/deps.ts';
import { Receipts } from '../proofs/receipts.ts';
import { plainText } from './check.ts';
import { EscrowClaims } from './service.ts';
import { CLAIM_LIST_CAP } from './store.ts';

export interface EscrowDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  publicUrl: URL;
}

const PLAIN = 'must not contain ", \\, control characters or lone surrogates: the escrow compares it unescaped';
const Kind = z
  .string()
  .max(64)
  .refine(plainText, PLAIN)
  .describe('The receipt kind the escrow expects (e.g. "notary"). An empty string means the receipt must declare no kind: never a wildcard.');
const JobField = z
  .string()
  .min(1)
  .max(64)
  .refine(plainText, PLAIN)
  .refine((s) => s !== 'kind', 'cannot be "kind"')
  .describe('The top-level payload field that carries the job id; default "id" (the receipt\'s request id).');
const JobId = z
  .string()
  .min(1)
  .max(128)
  .refine(plainText, PLAIN)
  .describe("The escrow's job id. Omitted: the receipt's own value of the job-id field is the job id the claim names.");
const RequestId = z.string().min(1).max(128);

const Reason = z.object({ code: z.string(), message: z.string() });
const TrustModel = z.string().describe('What claimable means and does not: the gateway never states that an escrow exists, is funded or will pay.');
const ClaimView = z.object({
  id: z.string(),
  object: z.literal('escrow.claim'),
  request_id: z.string(),
  kind: z.string(),
  job_field: z.string(),
  job_id: z.string().nullable(),
  claim_job_id: z.string().nullable(),
  claimable: z.boolean().describe('The verdict as prepared then.'),
  reasons: z.array(Reason),
  signer: z.string(),
  recovered_address: z.string().nullable(),
  payload_hash: z.string(),
  created_at: z.string(),
});
const ClaimCheck = z.object({
  id: z.string().nullable().describe('The prepared claim stored by POST; null on the read-only check.'),
  object: z.literal('escrow.claim'),
  request_id: z.string(),
  receipt_kind: z.string(),
  escrow: z.object({ kind: z.string(), job_field: z.string(), job_id: z.string().nullable() }).describe('The terms checked.'),
  claimable: z.boolean().describe('The signature recovers to the receipt signer and the payload binds to the job id and the kind.'),
  reasons: z.array(Reason).describe('Why not claimable, as machine codes and text; empty when claimable.'),
  checks: z.object({
    signature: z.object({ ok: z.boolean(), recovered_address: z.string().nullable(), expected_signer: z.string() }),
    job: z.object({ ok: z.boolean(), field: z.string(), occurrences: z.number().int(), value: z.string().nullable(), offset: z.number().int().nullable() }),
    kind: z.object({ ok: z.boolean(), expected: z.string(), declared: z.string().nullable(), occurrences: z.number().int(), offset: z.number().int().nullable() }),
  }),
  claim: z
    .object({
      function: z.string(),
      args: z.object({ jobId: z.string().nullable(), payload: z.string().describe('0x hex of the payload bytes as signed.'), signature: z.string() }),
      calldata: z.string().nullable().describe('The ABI-encoded claim call; null when no job id can be named or the signature is malformed.'),
      payload_text: z.string(),
      payload_length: z.number().int(),
      payload_hash: z.string(),
      digest: z.string().describe('The EIP-191 personal-sign hash of the payload bytes.'),
      v: z.number().int().nullable(),
      r: z.string().nullable(),
      s: z.string().nullable(),
      signer: z.string().describe('The receipt signer the escrow must trust (GET /v1/receipts/pubkey).'),
    })
    .describe("The exact inputs of the escrow contract's claim function."),
  trust_model: TrustModel,
  checked_at: z.string(),
  prepared: ClaimView.nullable().describe('On the read-only check: your latest prepared claim for this receipt, as prepared then.'),
});

/** Escrow claims (spec: proofs): prepare the inputs of a reference escrow's claim from your receipts, and check them. */
export function escrowRoutes(app: FastifyInstance, d: EscrowDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];
  const config = { auth: 'session' as const };
  const signer = d.signer.address;
  const claims = new EscrowClaims(d.db, d.clock, signer, new Receipts(d.db, d.clock, signer, publicBase(d.publicUrl)));

  r.post(
    '/v1/escrow/claims',
    {
      config,
      schema: {
        tags,
        summary:
          "Assemble the escrow contract's claim inputs from one of your receipts and check its two preconditions (signature recovers; payload binds to the job id and exactly the kind); stored in your trail. Never states that an escrow exists, is funded or will pay",
        body: z
          .object({
            request_id: RequestId.describe('Your receipt, by request id (or usage-event id).'),
            kind: Kind,
            job_field: JobField.optional(),
            job_id: JobId.optional(),
          })
          .strict(),
        response: { 201: ClaimCheck },
      },
    },
    async (req, reply) => {
      const { request_id, ...terms } = req.body;
      return reply.code(201).send(await claims.prepare(requireSession(req).accountId, request_id, terms));
    },
  );

  r.get(
    '/v1/escrow/claims',
    {
      config,
      schema: {
        tags,
        summary: `Your trail of prepared claims, newest first (the ${CLAIM_LIST_CAP} most recent; verdicts as prepared then)`,
        response: { 200: z.object({ claims: z.array(ClaimView), count: z.number().int(), cap: z.number().int(), trust_model: TrustModel }) },
      },
    },
    async (req) => claims.list(requireSession(req).accountId),
  );

  r.get(
    '/v1/escrow/claims/:request_id',
    {
      config,
      schema: {
        tags,
        summary:
          'The same check, recomputed now and stored nowhere; terms from the query (kind, job_field, job_id) or else from your latest prepared claim for the receipt',
        params: z.object({ request_id: RequestId }),
        querystring: z.object({ kind: Kind.optional(), job_field: JobField.optional(), job_id: JobId.optional() }),
        response: { 200: ClaimCheck },
      },
    },
    async (req) => claims.recheck(requireSession(req).accountId, req.params.request_id, req.query),
  );
}
