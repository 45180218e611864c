import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { IdentityService } from '../identity/service.ts';
import type { DenylistService } from './denylist.ts';

export interface AdminMetricsSource {
  snapshot(): Promise<Record<string, unknown>>;
}

export function adminRoutes(app: FastifyInstance, deps: { identity: IdentityService; denylist: DenylistService; metrics: AdminMetricsSource }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['admin'];

  r.get(
    '/v1/admin/metrics',
    { config: { auth: 'admin' }, schema: { tags, summary: 'Accounts, spend by window, events by kind, billing_enforced', response: { 200: z.record(z.string(), z.unknown()) } } },
    async () => deps.metrics.snapshot(),
  );

  r.post(
    '/v1/admin/accounts/suspend',
    {
      config: { auth: 'admin' },
      schema: {
        tags,
        summary: "Suspend or lift an account; a suspended account's keys and sessions are refused",
        body: z.object({ account_id: z.string().min(1).max(64), suspended: z.boolean(), reason: z.string().max(500).nullable().optional() }).strict(),
        response: { 200: z.object({ account_id: z.string(), suspended: z.boolean(), reason: z.string().nullable(), suspended_at: z.string().nullable() }) },
      },
    },
    async (req) => deps.identity.setSuspended(req.body.account_id, req.body.suspended, req.body.reason ?? null),
  );

  r.post(
    '/v1/admin/denylist',
    {
      config: { auth: 'admin' },
      schema: {
        tags,
        summary: 'Refuse a payload by its full sha256 on every route that takes a body; stores no content',
        body: z.object({ sha256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex digits (a full sha256)'), reason: z.string().max(500).nullable().optional() }).strict(),
        response: { 200: z.object({ sha256: z.string(), created: z.boolean(), created_at: z.string() }), 201: z.object({ sha256: z.string(), created: z.boolean(), created_at: z.string() }) },
      },
    },
    async (req, reply) => {
      const res = await deps.denylist.add(req.body.sha256, req.body.reason ?? null);
      return reply.code(res.created ? 201 : 200).send(res);
    },
  );
}
