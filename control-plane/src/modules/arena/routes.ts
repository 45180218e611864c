import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { Leaderboard, RunParams, RunView, SlugParams, SuiteDetail, SuiteList } from './schemas.ts';
import type { ArenaService } from './service.ts';

/** The public arena (spec: inference): declared suites, the leaderboard and runs with their per-task receipts. */
export function arenaRoutes(app: FastifyInstance, arena: ArenaService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['arena'];
  const config = { auth: 'public' as const };

  r.get(
    '/v1/arena/leaderboard',
    { config, schema: { tags, summary: 'One row per (suite, model), each backed by a completed, fully receipted run over the suite\'s current tasks; empty until a runner account is configured', response: { 200: Leaderboard } } },
    async () => arena.leaderboard(),
  );

  r.get(
    '/v1/arena/suites',
    { config, schema: { tags, summary: 'The declared suites with their tasks_sha256, cadence and models; an empty array when none are declared', response: { 200: SuiteList } } },
    async () => arena.list(),
  );

  r.get(
    '/v1/arena/suites/:slug',
    { config, schema: { tags, summary: 'One declared suite: its tasks and the canonical serialization (RFC 8785) that tasks_sha256 covers', params: SlugParams, response: { 200: SuiteDetail } } },
    async (req) => arena.suite(req.params.slug),
  );

  r.get(
    '/v1/arena/runs/:id',
    { config, schema: { tags, summary: 'One run with its per-task receipt ids, each fetchable at GET /v1/receipts/shared/{id}; no model output', params: RunParams, response: { 200: RunView } } },
    async (req) => arena.run(req.params.id),
  );
}
