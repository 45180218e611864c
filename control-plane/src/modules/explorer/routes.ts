import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Explorer } from './service.ts';

const Snapshot = z.object({
  counts: z.record(z.string(), z.number()),
  recent: z.record(z.string(), z.array(z.unknown())),
  generated_at: z.string(),
  cache_seconds: z.number(),
});

export function explorerRoutes(app: FastifyInstance, explorer: Explorer): void {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/explorer',
    {
      config: { auth: 'public' },
      schema: {
        tags: ['proofs'],
        summary: 'Aggregate proof counts, and the most recent shared receipts, anchor batches, passports and sealed calls (refreshed every 15 s)',
        response: { 200: Snapshot },
      },
    },
    async (_req, reply) => {
      reply.header('cache-control', 'public, max-age=15');
      return explorer.snapshot();
    },
  );
}
