import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ServiceError, type Clock } from '@svc/shared';
import type { Metrics } from '../../metrics.ts';
import type { HealthService } from './health.ts';

const Uptime = z.object({
  window_seconds: z.number(),
  samples_expected: z.number(),
  samples_healthy: z.number(),
  uptime_ratio: z.number().nullable(),
});

export interface PlatformInfo {
  name: string;
  version: string;
  publicUrl: URL;
}

export function platformRoutes(app: FastifyInstance, deps: { health: HealthService; metrics: Metrics; info: PlatformInfo; clock: Clock }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['platform'];

  r.get(
    '/',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Service banner',
        response: { 200: z.object({ name: z.string(), version: z.string(), openapi: z.string(), status: z.string(), docs: z.string() }) },
      },
    },
    async () => ({
      name: deps.info.name,
      version: deps.info.version,
      openapi: new URL('/openapi.json', deps.info.publicUrl).toString(),
      status: new URL('/v1/status', deps.info.publicUrl).toString(),
      docs: 'Every route, its auth scheme and its schemas are in the OpenAPI document.',
    }),
  );

  r.get('/healthz', { config: { auth: 'public' }, schema: { tags, summary: 'Liveness', response: { 200: z.literal('ok') } } }, async (_req, reply) =>
    reply.type('text/plain; charset=utf-8').send('ok'),
  );

  r.get(
    '/readyz',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Readiness: 200 once this process takes work (with `npm start`, once its local node agent is connected); 503 in the error envelope before, and while stopping',
        response: { 200: z.literal('ok') },
      },
    },
    async (_req, reply) => {
      const why = await deps.health.readiness.unmet();
      if (why) throw new ServiceError('unavailable', `Not ready: ${why}`, { retry_after: 1 });
      return reply.type('text/plain; charset=utf-8').send('ok');
    },
  );

  r.get(
    '/v1/status',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Recorded health and uptime',
        response: {
          200: z.object({
            status: z.enum(['ok', 'degraded']),
            now: z.string(),
            process: z.object({ started_at: z.string(), uptime_seconds: z.number() }),
            database: z.object({ ok: z.boolean(), latency_ms: z.number() }),
            sample_interval_seconds: z.number(),
            last_sample: z.object({ at: z.string(), ok: z.boolean() }).nullable(),
            uptime: z.record(z.string(), Uptime),
          }),
        },
      },
    },
    async () => deps.health.status(),
  );

  r.get(
    '/v1/attestation',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Live TEE attestation, or verified:false with a sanitized error',
        response: { 200: z.object({ verified: z.boolean(), backend: z.string().nullable(), error: z.string().nullable(), checked_at: z.string() }) },
      },
    },
    async () => ({ verified: false, backend: null, error: 'no TEE attestation backend is configured on this deployment', checked_at: deps.clock.now().toISOString() }),
  );

  // Generated on the first request (not at boot) and kept as its JSON text: later requests send the text as
  // it is, with no validation or serialization of a document this size.
  let docText: string | null = null;
  const openapi = async (_req: unknown, reply: FastifyReply) => {
    docText ??= JSON.stringify(app.swagger());
    return reply.type('application/json; charset=utf-8').send(docText);
  };
  const docSchema = { tags, summary: 'OpenAPI 3.1 document of every wired route', response: { 200: z.record(z.string(), z.unknown()) } };
  r.get('/openapi.json', { config: { auth: 'public' }, schema: docSchema }, openapi);
  r.get('/v1/openapi.json', { config: { auth: 'public' }, schema: { ...docSchema, hide: true } }, openapi);

  r.get(
    '/metrics',
    { config: { auth: 'metrics' }, schema: { tags, summary: 'Prometheus text exposition (aggregate only)', response: { 200: z.string() } } },
    async (_req, reply) => reply.type(deps.metrics.registry.contentType).send(await deps.metrics.exposition()),
  );
}
