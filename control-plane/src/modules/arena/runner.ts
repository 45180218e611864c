import { newId, type Clock } from '@svc/shared';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ArenaTaskResult } from '../../db/schema-arena.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { chatUnderKey, failureOf, isCallerRefusal, type ModelCallDeps } from '../evals/model-call.ts';
import { outputFingerprint } from '../replay/fingerprint.ts';
import { insertRun, type RunRow } from './store.ts';
import type { DeclaredSuite } from './suites.ts';

/** What the arena's calls are recorded under (usage events and receipts of the runner account). */
export const ARENA_ROUTE = 'arena run';

/** Shares a receipt of the runner account publicly (GET /v1/receipts/shared/:id); the proofs module's Receipts. */
export type ShareReceipt = (accountId: string, receiptId: string) => Promise<unknown>;

const NO_GRADER = () => Promise.reject(new Error('arena suites have no graded assertions'));

/**
 * Runs a declared suite against one model under the runner's key: each task one metered chat completion
 * (its receipt shared publicly), checked against its assertions. A refusal of the runner's key (credit, a
 * cap, revocation) stops the run, which is recorded as failed. The run is written once, when it ended.
 */
export async function runSuite(d: { db: Kysely<DB>; clock: Clock; calls: ModelCallDeps; share: ShareReceipt }, p: KeyPrincipal, suite: DeclaredSuite, model: string): Promise<RunRow> {
  const started = d.clock.now();
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
  }
  const passed = results.filter((r) => r.passed).length;
  return insertRun(d.db, {
    id: newId('arun_'),
    suite_slug: cfg.slug,
    tasks_sha256: suite.tasks_sha256,
    model,
    runner_account_id: p.accountId,
    key_id: p.keyId,
    state: error ? 'failed' : 'completed',
    tasks_total: cfg.tasks.length,
    tasks_passed: passed,
    pass_rate: passed / cfg.tasks.length,
    receipted: !error && results.length === cfg.tasks.length && results.every((r) => r.receipt_id !== null),
    cost_micro_usd: results.reduce((n, r) => n + r.cost_micro_usd, 0),
    results: JSON.stringify(results),
    error: error ? JSON.stringify(error) : null,
    started_at: started,
    finished_at: d.clock.now(),
  });
}
