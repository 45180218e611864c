import type { Clock } from '@svc/shared';
import type { Insertable } from 'kysely';
import type { ArenaRunsTable, ArenaTaskResult } from '../../db/schema-arena.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { StepFault } from '../../jobs/faults.ts';
import { chatUnderKey, failureOf, isCallerRefusal, type ModelCallDeps } from '../evals/model-call.ts';
import { outputFingerprint } from '../replay/fingerprint.ts';
import type { DeclaredSuite } from './suites.ts';

/** What the arena's calls are recorded under (usage events and receipts of the runner account). */
export const ARENA_ROUTE = 'arena run';

/** Shares a receipt of the runner account publicly (GET /v1/receipts/shared/:id); the proofs module's Receipts. */
export type ShareReceipt = (accountId: string, receiptId: string) => Promise<unknown>;

const NO_GRADER = () => Promise.reject(new Error('arena suites have no graded assertions'));

/** The run under way: its id, when it started, and where the tasks done so far are kept. */
export interface LiveRun {
  id: string;
  started: Date;
  progress(results: ArenaTaskResult[]): Promise<void>;
  /** Test seam: called after each task was kept (a throw stands for the process dying there). */
  stepFault?: StepFault | undefined;
}

/**
 * Runs a declared suite against one model under the runner's key: each task one metered chat completion
 * (its receipt shared publicly), checked against its assertions, and kept as done (`run.progress`) before
 * the next starts. A refusal of the runner's key (credit, a cap, revocation) stops the run, which is recorded
 * as failed. Answers the run's row, to be written once it ended.
 */
export async function runSuite(d: { clock: Clock; calls: ModelCallDeps; share: ShareReceipt }, p: KeyPrincipal, suite: DeclaredSuite, model: string, run: LiveRun): Promise<Insertable<ArenaRunsTable>> {
  const cfg = suite.config;
  const results: ArenaTaskResult[] = [];
  let error: { type: string; message: string } | null = null;
  for (const [i, task] of cfg.tasks.entries()) {
    const body: Record<string, unknown> = { model, messages: task.messages };
    if (cfg.max_tokens !== undefined) body.max_tokens = cfg.max_tokens;
    if (cfg.temperature !== undefined) body.temperature = cfg.temperature;
    try {
      const a = await chatUnderKey(d.calls, p, body, { route: ARENA_ROUTE, checkChatRoute: true });
      const seen = { output: a.text, latencyMs: a.latencyMs, costMicroUsd: a.costMicroUsd };
      let passed = true;
      for (const check of suite.checkers[i]!) if (!(await check(seen, NO_GRADER)).passed) passed = false;
      await d.share(p.accountId, a.requestId);
      results.push({ task_id: task.id, passed, receipt_id: a.requestId, output_sha256: outputFingerprint(a.body), cost_micro_usd: a.costMicroUsd, error: null });
    } catch (e) {
      if (isCallerRefusal(e)) {
        error = failureOf(e);
        break;
      }
      results.push({ task_id: task.id, passed: false, receipt_id: null, output_sha256: null, cost_micro_usd: 0, error: failureOf(e) });
    }
    await run.progress(results);
    await run.stepFault?.('arena.task_done', run.id);
  }
  return runRow({ id: run.id, suite: cfg.slug, tasksSha256: suite.tasks_sha256, tasksTotal: cfg.tasks.length, model, accountId: p.accountId, keyId: p.keyId }, results, error, run.started, d.clock.now());
}

/** An arena run's row: its outcome from the tasks done (`error`: why it stopped early). */
export function runRow(
  r: { id: string; suite: string; tasksSha256: string; tasksTotal: number; model: string; accountId: string; keyId: string },
  results: ArenaTaskResult[],
  error: { type: string; message: string } | null,
  started: Date,
  finished: Date,
): Insertable<ArenaRunsTable> {
  const passed = results.filter((x) => x.passed).length;
  return {
    id: r.id,
    suite_slug: r.suite,
    tasks_sha256: r.tasksSha256,
    model: r.model,
    runner_account_id: r.accountId,
    key_id: r.keyId,
    state: error ? 'failed' : 'completed',
    tasks_total: r.tasksTotal,
    tasks_passed: passed,
    pass_rate: passed / r.tasksTotal,
    receipted: !error && results.length === r.tasksTotal && results.every((x) => x.receipt_id !== null),
    cost_micro_usd: results.reduce((n, x) => n + x.cost_micro_usd, 0),
    results: JSON.stringify(results),
    error: error ? JSON.stringify(error) : null,
    started_at: started,
    finished_at: finished,
  };
}
