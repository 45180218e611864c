import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import type { Agents } from './create.ts';
import { MAX_INPUT_BYTES, SIGNATURE_WINDOW_SECONDS } from './hooks.ts';
import { HookAccepted, HookDisabled, HookRotated, IdParams, SecretBody, SecretResult } from './schemas.ts';

const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

/** Inbound hooks: the owner's rotate, disable and secret routes, and the public route a hook URL names. */
export function agentHookRoutes(app: FastifyInstance, agents: Agents): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['agents'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/agents/:id/hooks/rotate',
    { config, schema: { tags, summary: 'Mint or replace the inbound hook URL; returned once; the previous URL dies at once', params: IdParams, response: { 200: HookRotated } } },
    async (req) => agents.hooks.rotate(me(req), req.params.id),
  );

  r.post(
    '/v1/agents/:id/hooks/disable',
    { config, schema: { tags, summary: 'Drop the hook URL', params: IdParams, response: { 200: HookDisabled } } },
    async (req) => agents.hooks.disable(me(req), req.params.id),
  );

  r.post(
    '/v1/agents/:id/hooks/secret',
    { config, schema: { tags, summary: 'Set or clear (null) the HMAC secret; sealed, never returned', params: IdParams, body: SecretBody, response: { 200: SecretResult } } },
    async (req) => agents.hooks.setSecret(me(req), req.params.id, req.body.secret),
  );

  r.post(
    '/v1/agents/:id/hooks/:token',
    {
      // The path token authenticates (checked in the handler); the spec lists the route as public.
      config: { auth: 'public', rawBody: true, documentedBody: { contentType: '*/*', schema: { type: 'string', format: 'binary' } } },
      bodyLimit: MAX_INPUT_BYTES,
      schema: {
        tags,
        summary: `Inbound trigger: queues a run with the raw body as SVC_INPUT (at most ${MAX_INPUT_BYTES} bytes); 202. With a secret set: X-Svc-Timestamp (unix seconds, within ${SIGNATURE_WINDOW_SECONDS} s) and X-Svc-Signature (hex HMAC-SHA256 over "<timestamp>.<body>"), each signature once. Wrong token 404, bad signature 401, replay 409, over max_runs_per_hour 429 with Retry-After`,
        params: z.object({ id: z.string().max(64), token: z.string().max(200) }),
        headers: z.object({ 'x-svc-timestamp': z.string().max(32).optional(), 'x-svc-signature': z.string().max(200).optional() }),
        response: { 202: HookAccepted },
      },
    },
    async (req, reply) => {
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const accepted = await agents.hooks.inbound({
        agentId: req.params.id,
        token: req.params.token,
        body,
        timestamp: header(req.headers['x-svc-timestamp']),
        signature: header(req.headers['x-svc-signature']),
      });
      return reply.code(202).send(accepted);
    },
  );
}
