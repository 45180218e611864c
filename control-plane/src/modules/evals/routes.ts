import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { MonitorsService } from './monitors.ts';
import {
  EVALS_CAP,
  EvalDeleted,
  EvalInput,
  EvalList,
  EvalParams,
  EvalView,
  MONITORS_CAP,
  MonitorDeleted,
  MonitorInput,
  MonitorList,
  MonitorParams,
  MonitorPatch,
  MonitorView,
  RUNS_CAP,
  RunBody,
  RunList,
  RunQuery,
  RunView,
} from './schemas.ts';
import type { EvalsService } from './service.ts';

/**
 * Eval suites and drift monitors (spec: quality), session routes. `/v1/evals/monitors` is a literal segment:
 * it is never read as a suite id.
 */
export function evalsRoutes(app: FastifyInstance, d: { evals: EvalsService; monitors: MonitorsService }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['quality'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/evals',
    {
      config,
      schema: {
        tags,
        summary: `Create an eval suite: a catalog model, cases (messages, variables) and weighted assertions with thresholds (equals, contains, icontains, regex, is_json, json_schema, latency_ms_below, cost_below, llm_rubric); at most ${EVALS_CAP} per account`,
        body: EvalInput,
        response: { 201: EvalView },
      },
    },
    async (req, reply) => reply.code(201).send(await d.evals.create(me(req), req.body)),
  );

  r.get(
    '/v1/evals',
    { config, schema: { tags, summary: `Your eval suites, newest first, each with its newest run; complete (at most ${EVALS_CAP})`, response: { 200: EvalList } } },
    async (req) => d.evals.list(me(req)),
  );

  r.delete(
    '/v1/evals/:id',
    { config, schema: { tags, summary: 'Delete a suite with its runs and drift monitors (receipts of its calls stay)', params: EvalParams, response: { 200: EvalDeleted } } },
    async (req) => d.evals.remove(me(req), req.params.id),
  );

  r.post(
    '/v1/evals/:id/run',
    {
      config,
      schema: {
        tags,
        summary:
          "Run a suite now: each case (each of ?repeat=N attempts) is a metered, receipted chat completion under key_id (else the suite's designated key); returns pass rate, pass@N, pass^N, per-case results with outputs (returned once, never stored) and the regression flag against the previous run",
        params: EvalParams,
        querystring: RunQuery,
        body: RunBody,
        response: { 200: RunView },
      },
    },
    async (req) => d.evals.run(me(req), req.params.id, { keyId: req.body?.key_id, repeat: req.query.repeat }),
  );

  r.get(
    '/v1/evals/:id/runs',
    { config, schema: { tags, summary: `A suite's run history, newest first (its ${RUNS_CAP} newest), content-free`, params: EvalParams, response: { 200: RunList } } },
    async (req) => d.evals.runs(me(req), req.params.id),
  );

  r.post(
    '/v1/evals/monitors',
    {
      config,
      schema: {
        tags,
        summary: `Create a drift monitor: runs a suite of yours on the leader's schedule (interval at least an hour) and fires eval_drift_detected when the measured pass rate falls under the threshold or more than the drop tolerance below the baseline; at most ${MONITORS_CAP} per account`,
        body: MonitorInput,
        response: { 201: MonitorView },
      },
    },
    async (req, reply) => reply.code(201).send(await d.monitors.create(me(req), req.body)),
  );

  r.get(
    '/v1/evals/monitors',
    { config, schema: { tags, summary: `Your drift monitors with last pass rate, failure streak and next run; complete (at most ${MONITORS_CAP})`, response: { 200: MonitorList } } },
    async (req) => d.monitors.list(me(req)),
  );

  r.patch(
    '/v1/evals/monitors/:id',
    { config, schema: { tags, summary: 'Pause or resume a monitor; change its interval, threshold or drop tolerance; reset its baseline', params: MonitorParams, body: MonitorPatch, response: { 200: MonitorView } } },
    async (req) => d.monitors.update(me(req), req.params.id, req.body),
  );

  r.delete(
    '/v1/evals/monitors/:id',
    { config, schema: { tags, summary: 'Delete a drift monitor; its suite and runs stay', params: MonitorParams, response: { 200: MonitorDeleted } } },
    async (req) => d.monitors.remove(me(req), req.params.id),
  );
}
