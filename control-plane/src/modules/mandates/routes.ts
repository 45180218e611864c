import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SCOPE_NAMES } from '@svc/shared';
import { requireSession } from '../../http/auth.ts';
import { dateTime } from '../../http/fields.ts';
import type { KeyRoute } from './bounds.ts';
import type { MandatesService } from './service.ts';
import { PolicyIn } from '../policies/schemas.ts';

const MAX_CAP = 1_000_000_000_000_000; // $1e9 in micro-USD, as on keys

const MandateBody = z
  .object({
    parent_key_id: z.string().max(64).describe('One of your API keys (active); the mandate key is delegated below it.'),
    purpose: z.string().trim().min(1).max(500).describe('What the grant is for; signed into the document.'),
    spend_cap_micro_usd: z.number().int().min(0).max(MAX_CAP).describe("Lifetime spend cap of the mandate key and its subtree; at most the parent's remaining cap."),
    expires_at: dateTime().describe("ISO 8601 date-time in the future, no later than the parent key's expiry."),
    scopes: z.array(z.enum(SCOPE_NAMES)).max(SCOPE_NAMES.length).optional().describe("A subset of the parent's scopes; omitted or empty: the parent's."),
    allowed_models: z.array(z.string().trim().min(1).max(200)).min(1).max(100).optional().describe('Models the key may name; omitted: any (within the parent chain\'s lists).'),
    allowed_routes: z
      .array(z.string().trim().min(1).max(200))
      .min(1)
      .max(100)
      .optional()
      .describe('Routes the key may call: "METHOD /v1/path", "/v1/path" (any method) or "/v1/prefix/*"; omitted: any route its scopes open.'),
    prepare: z.boolean().optional().describe('true: check the fields and answer 200 with the document to co-sign (and its mandate_id); nothing is written.'),
    mandate_id: z.string().max(64).optional().describe('With owner_signature: the id the prepare step drew.'),
    owner_signature: z.string().max(200).optional().describe("EIP-191 signature of the prepared document's canonical text by a wallet linked to this account."),
    policy: PolicyIn.optional().describe("A policy the mandate key carries, added to the parent key's (GET /v1/policies); enforced on every request of the key and keys below it."),
  })
  .strict();

const MandateDocument = z.object({
  type: z.literal('svc.mandate'),
  version: z.literal(1),
  mandate_id: z.string(),
  account_id: z.string(),
  parent_key_id: z.string(),
  purpose: z.string(),
  scopes: z.array(z.string()),
  spend_cap_micro_usd: z.number(),
  expires_at: z.string(),
  allowed_models: z.array(z.string()).nullable(),
  allowed_routes: z.array(z.string()).nullable(),
  gateway: z.string().describe('The gateway signer address that countersigns.'),
});
const Owner = z.object({ address: z.string(), signature: z.string() }).nullable().describe('The linked wallet that co-signed the document, or null.');
const Status = z.enum(['active', 'frozen', 'expired', 'revoked']);
const Signed = {
  canonical: z.string().describe('RFC 8785 canonical JSON; the signatures are EIP-191 personal_sign over it.'),
  signature: z.string(),
  signer: z.string(),
  scheme: z.string(),
};

const MandateView = z.object({
  id: z.string(),
  object: z.literal('mandate'),
  status: Status,
  purpose: z.string(),
  parent_key_id: z.string(),
  key_id: z.string(),
  key_prefix: z.string().nullable(),
  scopes: z.array(z.string()),
  spend_cap_micro_usd: z.number(),
  spent_micro_usd: z.number().describe('Spend of the mandate key and keys below it.'),
  remaining_micro_usd: z.number(),
  allowed_models: z.array(z.string()).nullable(),
  allowed_routes: z.array(z.string()).nullable(),
  expires_at: z.string(),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
  owner: Owner,
  document: MandateDocument,
  ...Signed,
});
const NewMandate = MandateView.extend({ key: z.string().describe('The mandate key (sk-svc_); shown this once, stored only as sha256.') });
const Terms = z.object({
  object: z.literal('mandate_terms'),
  mandate_id: z.string(),
  document: MandateDocument,
  canonical: z.string().describe('Sign exactly this text (EIP-191 personal_sign).'),
  scheme: z.string(),
  linked_wallets: z.array(z.string()),
  next: z.string(),
});
const ProofDoc = z.object({
  type: z.literal('svc.mandate_proof'),
  version: z.literal(1),
  mandate_id: z.string(),
  account_id: z.string(),
  key_id: z.string(),
  key_prefix: z.string(),
  mandate: MandateDocument,
  mandate_signature: z.string().describe("The gateway's signature of the mandate document."),
  owner: Owner,
  status: Status.describe('At generated_at.'),
  bounds: z.object({
    spend_cap_micro_usd: z.number(),
    spent_micro_usd: z.number(),
    remaining_micro_usd: z.number(),
    expires_at: z.string(),
    scopes: z.array(z.string()),
    allowed_models: z.array(z.string()).nullable(),
    allowed_routes: z.array(z.string()).nullable(),
  }),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
  signer: z.string(),
  generated_at: z.string(),
});
const IdParams = z.object({ id: z.string().max(64) });

/** Mandates (spec: keys): bounded grants carried by a delegated sub-key, signed, optionally co-signed by a linked wallet. */
export function mandatesRoutes(app: FastifyInstance, mandates: MandatesService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['keys'];
  const config = { auth: 'session' as const };
  const keyRoutes = (): KeyRoute[] => app.routeTable.filter((x) => x.auth === 'key').map((x) => ({ method: x.method, url: x.url }));

  r.post(
    '/v1/mandates',
    {
      config,
      schema: {
        tags,
        summary:
          'Create a mandate: a delegated sub-key bounded by cap, expiry, scopes and model and route allow lists, with a gateway-signed document; the key is shown once. prepare: true answers the document to co-sign with a linked wallet (200, nothing written); send it back with mandate_id and owner_signature',
        body: MandateBody,
        response: { 200: Terms, 201: NewMandate },
      },
    },
    async (req, reply) => {
      const { prepare, ...input } = req.body;
      const accountId = requireSession(req).accountId;
      if (prepare) return reply.code(200).send(await mandates.prepare(accountId, input, keyRoutes()));
      return reply.code(201).send(await mandates.create(accountId, input, keyRoutes()));
    },
  );

  r.get(
    '/v1/mandates',
    { config, schema: { tags, summary: 'The 200 newest mandates, each with its key\'s status and spend now', response: { 200: z.object({ mandates: z.array(MandateView) }) } } },
    async (req) => ({ mandates: await mandates.list(requireSession(req).accountId) }),
  );

  r.delete(
    '/v1/mandates/:id',
    {
      config,
      schema: {
        tags,
        summary: "Revoke a mandate and its key's delegated subtree; idempotent",
        params: IdParams,
        response: { 200: z.object({ id: z.string(), object: z.literal('mandate'), revoked: z.literal(true), revoked_at: z.string(), key_id: z.string(), revoked_ids: z.array(z.string()) }) },
      },
    },
    async (req) => mandates.revoke(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/mandates/:id/proof',
    {
      config,
      schema: {
        tags,
        summary: 'Publicly verifiable authorization certificate: the mandate document, its signatures, the key, and its status and spend now, signed by the gateway (verify with POST /v1/receipts/verify or any Ethereum library)',
        params: IdParams,
        response: { 200: z.object({ proof: ProofDoc, ...Signed }) },
      },
    },
    async (req) => mandates.proof(requireSession(req).accountId, req.params.id),
  );
}
