import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { BenchmarkParams, BenchmarkView, CohortsView, HistoryView, SubmitBody } from './schemas.ts';
import type { BenchmarksService } from './service.ts';

/** Portfolio benchmarks (spec: assets), with an API key (scope `proofs`). */
export function benchmarksRoutes(app: FastifyInstance, svc: BenchmarksService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['assets'];
  const key = { auth: 'key' as const, scope: 'proofs' as const };

  r.post(
    '/v1/benchmarks/portfolio',
    {
      config: { ...key, billable: true },
      schema: {
        tags,
        summary:
          "Submit a portfolio's holdings by asset class to a peer cohort: holdings sealed and destroyed at retain_until; a signed result with your weights and the cohort's peer figures, released only over at least k participants (SVC_BENCHMARK_MIN_COHORT, default 5), bucketed, with primary and complementary suppression and release snapshots, else suppressed. privacy_tier 'confidential' answers 501. Metered. An unknown cohort or class, a retention in the past or a worthless portfolio is a 400 with nothing written or charged",
        body: SubmitBody,
        response: { 201: BenchmarkView },
      },
    },
    async (req, reply) => {
      const out = await svc.submit(requireKey(req), req.body, { requestId: req.id, runId: runIdOf(req) });
      setReceiptHeaders(reply, out.receipt);
      return reply.code(201).send(out.view);
    },
  );

  r.get(
    '/v1/benchmarks/cohorts',
    { config: key, schema: { tags, summary: 'Comparison universes with banded participant counts, the anti-leakage parameters and the guarantees not implemented', response: { 200: CohortsView } } },
    async () => svc.cohorts(),
  );

  r.get(
    '/v1/benchmarks/:benchmarkId',
    { config: key, schema: { tags, summary: "The latest result and the retention position (sealed or destroyed, seconds remaining); another tenant's id answers 404", params: BenchmarkParams, response: { 200: BenchmarkView } } },
    async (req) => svc.get(requireKey(req).accountId, req.params.benchmarkId),
  );

  r.get(
    '/v1/benchmarks/:benchmarkId/history',
    { config: key, schema: { tags, summary: 'Every result version with its methodology version, as signed; never recomputed under a newer methodology', params: BenchmarkParams, response: { 200: HistoryView } } },
    async (req) => svc.history(requireKey(req).accountId, req.params.benchmarkId),
  );

  r.post(
    '/v1/benchmarks/:benchmarkId/refresh',
    { config: { ...key, billable: true }, schema: { tags, summary: 'Recompute as a new version under the current methodology and the peer figures released now; 409 once retention destroyed the holdings. Metered', params: BenchmarkParams, response: { 201: BenchmarkView } } },
    async (req, reply) => {
      const out = await svc.refresh(requireKey(req), req.params.benchmarkId, { requestId: req.id, runId: runIdOf(req) });
      setReceiptHeaders(reply, out.receipt);
      return reply.code(201).send(out.view);
    },
  );
}
