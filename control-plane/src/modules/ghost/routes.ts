import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SCOPE_NAMES } from '@svc/shared';
import { requireSession } from '../../http/auth.ts';
import { GHOST_DEFAULT_TTL_SECONDS, GHOST_MAX_LIFETIME_SECONDS, type GhostService } from './service.ts';
import { PolicyIn } from '../policies/schemas.ts';

const MAX_CAP = 1_000_000_000_000_000; // $1e9 in micro-USD, as on keys

const GhostBody = z
  .object({
    name: z.string().trim().min(1).max(100).optional().describe('A label; purged with the ghost.'),
    scopes: z.array(z.enum(SCOPE_NAMES)).max(SCOPE_NAMES.length).optional().describe('Omitted or empty: every scope.'),
    spend_cap_micro_usd: z.number().int().min(0).max(MAX_CAP).optional().describe('Lifetime spend cap of the ghost key.'),
    ttl_seconds: z
      .number()
      .int()
      .min(1)
      .max(GHOST_MAX_LIFETIME_SECONDS)
      .optional()
      .describe(`Seconds until the ghost expires; default ${GHOST_DEFAULT_TTL_SECONDS}. Its whole life, extensions included, is at most 24 hours.`),
    policy: PolicyIn.optional().describe('A policy the ghost key carries (GET /v1/policies): guardrail rule sets, models, an output-token limit.'),
  })
  .strict();

const GhostView = z.object({
  id: z.string(),
  object: z.literal('ghost_session'),
  name: z.string().nullable(),
  status: z.enum(['active', 'frozen', 'expired', 'revoked']),
  key_id: z.string(),
  key_prefix: z.string().nullable(),
  scopes: z.array(z.string()),
  spend_cap_micro_usd: z.number().nullable(),
  spent_micro_usd: z.number(),
  created_at: z.string(),
  expires_at: z.string(),
  seconds_remaining: z.number().int().describe('Whole seconds until the key is refused; 0 once expired.'),
  lifetime_seconds: z.number().int().describe('From the start to the current expiry.'),
  max_lifetime_seconds: z.number().int(),
});
const NewGhost = GhostView.extend({ key: z.string().describe('The ghost key (sk-svc_); shown this once, stored only as sha256.') });
const IdParams = z.object({ id: z.string().max(64) });

/** Ghost sessions (spec: keys): ephemeral scoped keys with a 24-hour life at most. */
export function ghostRoutes(app: FastifyInstance, ghosts: GhostService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['keys'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/ghost/sessions',
    {
      config,
      schema: { tags, summary: 'Start a ghost: an ephemeral scoped key, shown once; at most 100 live per account', body: GhostBody.default({}), response: { 201: NewGhost } },
    },
    async (req, reply) => reply.code(201).send(await ghosts.create(me(req), req.body)),
  );

  r.get(
    '/v1/ghost/sessions',
    { config, schema: { tags, summary: 'The 100 newest ghosts with seconds_remaining', response: { 200: z.object({ sessions: z.array(GhostView) }) } } },
    async (req) => ({ sessions: await ghosts.list(me(req)) }),
  );

  r.get(
    '/v1/ghost/sessions/:id',
    { config, schema: { tags, summary: 'One ghost, including seconds_remaining; a destroyed one is not found', params: IdParams, response: { 200: GhostView } } },
    async (req) => ghosts.get(me(req), req.params.id),
  );

  r.post(
    '/v1/ghost/sessions/:id/extend',
    {
      config,
      schema: {
        tags,
        summary: 'Move the expiry later by seconds; the whole life stays within 24 hours (beyond: 400)',
        params: IdParams,
        body: z.object({ seconds: z.number().int().min(1).max(GHOST_MAX_LIFETIME_SECONDS).describe('Seconds added to the current expiry.') }).strict(),
        response: { 200: GhostView },
      },
    },
    async (req) => ghosts.extend(me(req), req.params.id, req.body.seconds),
  );

  r.post(
    '/v1/ghost/sessions/:id/destroy',
    {
      config,
      schema: {
        tags,
        summary: 'Revoke the ghost key and purge its metadata',
        params: IdParams,
        response: { 200: z.object({ id: z.string(), object: z.literal('ghost_session'), destroyed: z.literal(true), key_id: z.string(), revoked_ids: z.array(z.string()) }) },
      },
    },
    async (req) => ghosts.destroy(me(req), req.params.id),
  );
}
