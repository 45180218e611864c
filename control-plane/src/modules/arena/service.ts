import type { Kysely } from 'kysely';
import { ServiceError, newId, notFound, type Clock } from '@svc/shared';
import type { ArenaConfig } from '../../config/arena.ts';
import { GONE_CHECK_STALE_MS, goneCheck, goneClaims } from '../../db/gone-check.ts';
import type { DB } from '../../db/schema.ts';
import type { ArenaTaskResult } from '../../db/schema-arena.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { Processes } from '../../http/idempotency.ts';
import type { StepFault } from '../../jobs/faults.ts';
import type { ModelCallDeps } from '../evals/model-call.ts';
import type { ModelCatalog } from '../inference/catalog.ts';
import type { KeysService } from '../keys/service.ts';
import { runRow, runSuite, type ShareReceipt } from './runner.ts';
import { endRun, lastStarted, latestReceipted, liveRuns, progressLive, runById, startLive, type RunRow } from './store.ts';
import { declareSuites, type DeclaredSuite } from './suites.ts';

export interface ArenaDeps {
  db: Kysely<DB>;
  clock: Clock;
  config: ArenaConfig;
  keys: KeysService;
  catalog: ModelCatalog;
  calls: ModelCallDeps;
  share: ShareReceipt;
  publicUrl: URL;
  /** This process (a run under way names it) and which processes are still there. */
  processes: Processes;
  log: { warn(obj: object, msg: string): void };
  /** Test seam: called between the steps of leader work (a throw stands for the process dying there). */
  stepFault?: StepFault | undefined;
}

/** Why an interrupted run stopped. */
const INTERRUPTED = { type: 'interrupted', message: 'The process running this arena run stopped before the run ended; the tasks it did stand as metered and receipted, and the pair runs again after its cadence' };

const runNotFound = () => notFound('Arena run');

/**
 * The public arena: suites the operator declares (tasks, their canonical serialization and tasks_sha256,
 * cadence, models), run on the leader's loop by the runner account through the metered path, each task
 * receipted and its receipt shared publicly; a leaderboard row per (suite, model) backed by the newest
 * completed, fully receipted run over the suite's current tasks. Nothing runs, and the leaderboard is empty,
 * until a runner key is configured. Owns arena_runs and arena_live.
 */
export class ArenaService {
  private readonly suites: Map<string, DeclaredSuite>;
  private readonly base: string;

  /** Which processes running runs are gone; a process missing once may be reconnecting. */
  private readonly gone: (ids: readonly string[]) => Promise<Set<string>>;

  constructor(private readonly d: ArenaDeps) {
    this.gone = goneCheck((ids) => d.processes.alive(ids), GONE_CHECK_STALE_MS);
    this.suites = declareSuites(d.config.suites);
    this.base = d.publicUrl.href.replace(/\/+$/, '');
  }

  get runnerConfigured(): boolean {
    return this.d.config.runnerKeyId !== null;
  }

  list() {
    return [...this.suites.values()].map((s) => ({
      slug: s.config.slug,
      name: s.config.name,
      description: s.config.description ?? null,
      cadence_seconds: s.config.cadence_seconds,
      models: s.config.models,
      task_count: s.config.tasks.length,
      tasks_sha256: s.tasks_sha256,
    }));
  }

  suite(slug: string) {
    const s = this.suites.get(slug);
    if (!s) throw notFound('Arena suite');
    const { tasks, ...rest } = s.config;
    return { ...rest, description: rest.description ?? null, max_tokens: rest.max_tokens ?? null, temperature: rest.temperature ?? null, tasks, canonical: s.canonical, tasks_sha256: s.tasks_sha256 };
  }

  async leaderboard() {
    const rows = [];
    if (this.runnerConfigured) {
      for (const s of this.suites.values()) {
        for (const model of s.config.models) {
          const r = await latestReceipted(this.d.db, s.config.slug, model, s.tasks_sha256);
          if (r) rows.push({ suite: s.config.slug, suite_name: s.config.name, model, run_id: r.id, run_url: `${this.base}/v1/arena/runs/${r.id}`, pass_rate: r.pass_rate, tasks_passed: r.tasks_passed, tasks_total: r.tasks_total, tasks_sha256: r.tasks_sha256, cost_micro_usd: Number(r.cost_micro_usd), finished_at: r.finished_at.toISOString() });
        }
      }
    }
    rows.sort((a, b) => (a.suite < b.suite ? -1 : a.suite > b.suite ? 1 : b.pass_rate - a.pass_rate || (a.model < b.model ? -1 : 1)));
    return { rows, runner_configured: this.runnerConfigured, generated_at: this.d.clock.now().toISOString() };
  }

  async run(id: string) {
    const r = await runById(this.d.db, id);
    if (!r) throw runNotFound();
    return this.runView(r);
  }

  /**
   * The leader's loop: every (suite, model) whose cadence elapsed since its last run runs once (a missed
   * stretch runs once, not per missed interval). A run is marked under way, by this process, before its first
   * task, and replaced by its row when it ended; a mark whose process is gone is a run interrupted by that
   * process's death: it is written as failed (`interrupted`) with the tasks it did, and its pair is not run
   * again before its cadence (those tasks were charged).
   */
  async runDue(): Promise<void> {
    await this.closeInterrupted();
    if (!this.runnerConfigured || this.suites.size === 0) return;
    const p = await this.runner();
    if (!p) return;
    const now = this.d.clock.now().getTime();
    for (const s of this.suites.values()) {
      for (const model of s.config.models) {
        const last = await lastStarted(this.d.db, s.config.slug, model);
        if (last && now - last.getTime() < s.config.cadence_seconds * 1000) continue;
        try {
          await this.d.catalog.resolve(model, 'chat');
        } catch (e) {
          if (!(e instanceof ServiceError)) throw e;
          this.d.log.warn({ suite: s.config.slug, model }, `arena: ${model} is not a chat model of the catalog now; not run`);
          continue;
        }
        const r = await this.runPair(p, s, model);
        if (r?.state === 'failed') {
          this.d.log.warn({ suite: s.config.slug, model, error: r.error }, 'arena: a run stopped on a refusal of the runner key');
          return; // the key's refusal holds for every pair
        }
      }
    }
  }

  /** One run of a pair, marked under way first; undefined when a run of the pair is under way already. */
  private async runPair(p: KeyPrincipal, s: DeclaredSuite, model: string): Promise<RunRow | undefined> {
    const id = newId('arun_');
    const started = this.d.clock.now();
    const processId = this.d.processes.processId;
    const marked = await startLive(this.d.db, {
      suite_slug: s.config.slug,
      model,
      run_id: id,
      tasks_sha256: s.tasks_sha256,
      tasks_total: s.config.tasks.length,
      runner_account_id: p.accountId,
      key_id: p.keyId,
      process_id: processId,
      results: '[]',
      started_at: started,
    });
    if (!marked) return undefined;
    const row = await runSuite({ clock: this.d.clock, calls: this.d.calls, share: this.d.share }, p, s, model, { id, started, progress: (results) => progressLive(this.d.db, id, results), stepFault: this.d.stepFault });
    return endRun(this.d.db, row, processId);
  }

  /** Runs marked under way by processes that are gone (missing at two passes in a row): written as failed (interrupted) with the tasks they did. */
  async closeInterrupted(): Promise<number> {
    let n = 0;
    for (const l of await goneClaims(this.gone, await liveRuns(this.d.db), (x) => x.process_id)) {
      const row = runRow(
        { id: l.run_id, suite: l.suite_slug, tasksSha256: l.tasks_sha256, tasksTotal: l.tasks_total, model: l.model, accountId: l.runner_account_id, keyId: l.key_id },
        l.results,
        INTERRUPTED,
        l.started_at,
        this.d.clock.now(),
      );
      if (await endRun(this.d.db, row, l.process_id)) n++;
    }
    return n;
  }

  /** The runner key's principal, or null (logged) when it is unknown, revoked or lacks the inference scope. */
  private async runner(): Promise<KeyPrincipal | null> {
    try {
      const p = await this.d.keys.principalOf(this.d.config.runnerKeyId!);
      if (p.scopes.includes('inference')) return p;
      this.d.log.warn({ key_id: p.keyId }, 'arena: the runner key lacks the inference scope; nothing runs');
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      this.d.log.warn({ key_id: this.d.config.runnerKeyId, err: e.message }, 'arena: the runner key is refused; nothing runs');
    }
    return null;
  }

  private runView(r: RunRow) {
    const results = r.results as ArenaTaskResult[];
    const current = this.suites.get(r.suite_slug)?.tasks_sha256;
    return {
      id: r.id,
      object: 'arena.run' as const,
      suite: r.suite_slug,
      model: r.model,
      tasks_sha256: r.tasks_sha256,
      current_tasks: current === r.tasks_sha256,
      state: r.state,
      receipted: r.receipted,
      tasks_total: r.tasks_total,
      tasks_passed: r.tasks_passed,
      pass_rate: r.pass_rate,
      cost_micro_usd: Number(r.cost_micro_usd),
      started_at: r.started_at.toISOString(),
      finished_at: r.finished_at.toISOString(),
      error: (r.error as { type: string; message: string } | null) ?? null,
      tasks: results.map((t) => ({
        task_id: t.task_id,
        passed: t.passed,
        receipt_id: t.receipt_id,
        receipt_url: t.receipt_id ? `${this.base}/v1/receipts/shared/${encodeURIComponent(t.receipt_id)}` : null,
        page_url: t.receipt_id ? `${this.base}/r/${encodeURIComponent(t.receipt_id)}` : null,
        output_sha256: t.output_sha256,
        cost_micro_usd: t.cost_micro_usd,
        error: t.error,
      })),
    };
  }
}
