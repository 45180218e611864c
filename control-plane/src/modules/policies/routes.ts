import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { PolicyView } from './schemas.ts';
import type { PoliciesService } from './service.ts';

/** Policies (spec: keys): list and revoke. A policy is attached where a key is minted (POST /v1/keys, /v1/keys/delegate). */
export function policiesRoutes(app: FastifyInstance, policies: PoliciesService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['keys'];
  const config = { auth: 'session' as const };

  r.get(
    '/v1/policies',
    { config, schema: { tags, summary: 'Your live policies, newest first (named-key envelope `policies`, no cap)', response: { 200: z.object({ policies: z.array(PolicyView) }) } } },
    async (req) => policies.list(requireSession(req).accountId),
  );

  r.delete(
    '/v1/policies/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Revoke a policy: keys carrying it run unconstrained and their receipts carry no policy stamp',
        params: z.object({ id: z.string().max(64) }),
        response: { 200: z.object({ id: z.string(), object: z.literal('policy'), revoked: z.literal(true), revoked_at: z.string() }) },
      },
    },
    async (req) => policies.revoke(requireSession(req).accountId, req.params.id),
  );
}
