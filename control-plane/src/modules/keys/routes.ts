import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SCOPE_NAMES, SCOPES } from '@svc/shared';
import { requireKey, requireSession } from '../../http/auth.ts';
import { dateTime } from '../../http/fields.ts';
import { PolicyIn } from '../policies/schemas.ts'; // policies
import type { KeysService } from './service.ts';

const MAX_CAP = 1_000_000_000_000_000; // $1e9 in micro-USD
const ScopeEnum = z.enum(SCOPE_NAMES).describe(Object.entries(SCOPES).map(([k, v]) => `${k}: ${v}`).join(' '));

const KeyInput = z
  .object({
    name: z.string().trim().min(1).max(100).optional(),
    scopes: z.array(ScopeEnum).max(SCOPE_NAMES.length).optional().describe('Omitted or empty: every scope.'),
    spend_cap_micro_usd: z.number().int().min(0).max(MAX_CAP).optional().describe('Lifetime spend cap of this key and its delegated subtree.'),
    expires_at: dateTime().optional().describe('ISO 8601 date-time in the future (at most 9999-12-31T23:59:59Z).'),
    policy: PolicyIn.optional(), // policies
  })
  .strict();

const KeyView = z.object({
  id: z.string(),
  object: z.literal('api_key'),
  name: z.string().nullable(),
  prefix: z.string(),
  parent_id: z.string().nullable(),
  scopes: z.array(z.string()),
  status: z.enum(['active', 'frozen', 'expiring', 'expired', 'revoked']),
  spend_cap_micro_usd: z.number().nullable(),
  spent_micro_usd: z.number(),
  subtree_spent_micro_usd: z.number(),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
  frozen_at: z.string().nullable(),
  frozen_reason: z.string().nullable(),
  rotated_to: z.string().nullable(),
  last_used_at: z.string().nullable(),
  allowed_models: z.array(z.string()).nullable().describe("A mandate key's model allow list (keys below it are held to it too); null: any model."),
  allowed_routes: z.array(z.string()).nullable().describe("A mandate key's route allow list (METHOD /path, /path or /prefix/*); null: any route its scopes open."),
  managed_by: z.enum(['mandate', 'ghost', 'agent']).nullable().describe('The mandate, ghost session or hosted agent this key belongs to; such a key is never rotated.'),
  policy_id: z.string().nullable().describe('The policy the key carries (GET /v1/policies); null: none.'), // policies
});
const NewKey = KeyView.extend({ key: z.string().describe('The sk-svc_ secret; shown this once, stored only as sha256.') });
const IdParams = z.object({ id: z.string().max(64) });

export function keysRoutes(app: FastifyInstance, keys: KeysService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['keys'];

  r.post(
    '/v1/keys',
    { config: { auth: 'session' }, schema: { tags, summary: 'Mint an API key; the secret is shown once', body: KeyInput.default({}), response: { 201: NewKey } } },
    async (req, reply) => reply.code(201).send(await keys.create(requireSession(req).accountId, req.body)),
  );

  r.get(
    '/v1/keys',
    { config: { auth: 'session' }, schema: { tags, summary: 'Every key of the account with subtree spend (bare array)', response: { 200: z.array(KeyView) } } },
    async (req) => keys.list(requireSession(req).accountId),
  );

  r.delete(
    '/v1/keys/:id',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Revoke a key and its delegated subtree', params: IdParams, response: { 200: z.object({ id: z.string(), revoked: z.boolean(), revoked_ids: z.array(z.string()) }) } },
    },
    async (req) => keys.revoke(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/keys/:id/rotate',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Scope-identical replacement; the old key works through the grace window',
        params: IdParams,
        body: z.object({ grace_seconds: z.number().int().min(0).max(30 * 86400).optional() }).strict().default({}),
        response: { 201: NewKey.extend({ replaces: z.object({ id: z.string(), expires_at: z.string(), status: z.string() }) }) },
      },
    },
    async (req, reply) => reply.code(201).send(await keys.rotate(requireSession(req).accountId, req.params.id, req.body.grace_seconds)),
  );

  r.post(
    '/v1/keys/:id/unfreeze',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Lift a circuit-breaker freeze', params: IdParams, response: { 200: KeyView.extend({ was_frozen: z.boolean() }) } },
    },
    async (req) => keys.unfreeze(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/keys/delegate',
    {
      config: { auth: 'key', scope: 'keys:delegate' },
      schema: { tags, summary: 'Mint a delegated sub-key bounded by the calling key', body: KeyInput.default({}), response: { 201: NewKey } },
    },
    async (req, reply) => reply.code(201).send(await keys.delegate(requireKey(req), req.body)),
  );
}
