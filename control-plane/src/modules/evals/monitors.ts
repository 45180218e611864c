import type { Kysely } from 'kysely';
import { ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import { GONE_CHECK_STALE_MS, goneCheck, goneClaims } from '../../db/gone-check.ts';
import type { DB } from '../../db/schema.ts';
import type { EventEmitter } from '../webhooks/service.ts';
import { failureOf } from './model-call.ts';
import { MONITORS_CAP, RUNS_CAP, type MonitorInput, type MonitorPatch } from './schemas.ts';
import type { EvalsService, ExecutedRun } from './service.ts';
import type { StepFault } from '../../jobs/faults.ts';
import type { Processes } from '../../http/idempotency.ts';
import { claimMonitor, claimedMonitors, countMonitors, monitorRunFailed, deleteMonitor, dueMonitors, insertMonitor, insertRun, lastRun, listMonitors, lockAccount, ownedMonitor, ownedSuite, type MonitorRow, type RunRow } from './store.ts';

export interface MonitorsDeps {
  db: Kysely<DB>;
  clock: Clock;
  evals: EvalsService;
  events: EventEmitter;
  /** This process (the claim of a run names it) and which processes are still there. */
  processes: Processes;
  log: { warn(obj: object, msg: string): void };
  /** Test seam: called between the steps of leader work (a throw stands for the process dying there). */
  stepFault?: StepFault | undefined;
}

/** What the interrupted-run check records. */
export const INTERRUPTED = 'interrupted: the process running this monitor\'s run stopped before the run ended; its calls stand as metered and receipted, and the monitor runs again at next_run_at';

/** Monitors one pass of the leader's loop runs at most (the rest are due on the next pass). */
const PER_PASS = 20;

const monitorNotFound = () => notFound('Drift monitor');

/** What a monitor compares: the pass rate with one attempt per case, the Wilson lower bound of it with more. */
const measureOf = (repeat: number): 'pass_rate' | 'wilson_lower' => (repeat > 1 ? 'wilson_lower' : 'pass_rate');
const measured = (repeat: number, r: Pick<RunRow, 'pass_rate' | 'wilson_lower'>) => (repeat > 1 ? r.wilson_lower : r.pass_rate);

/**
 * Drift monitors: each runs its suite on the leader's loop every `interval_seconds` (at least an hour),
 * under its key, and compares the measured rate (the pass rate; the Wilson lower bound of it when cases run
 * more than once) with its threshold and its baseline. A run that falls under the threshold, or more than
 * the drop tolerance below the baseline, drifts: the first drifting run after a run that did not fires
 * `eval_drift_detected` through the webhook outbox, in the transaction that records the run. A monitor due
 * while no leader ran runs once when one does (its next run is then counted from that run).
 */
export class MonitorsService {
  /** Which claimants are gone; a process missing once may be reconnecting. */
  private readonly gone: (ids: readonly string[]) => Promise<Set<string>>;

  constructor(private readonly d: MonitorsDeps) {
    this.gone = goneCheck((ids) => d.processes.alive(ids), GONE_CHECK_STALE_MS);
  }

  async create(accountId: string, input: MonitorInput) {
    const suite = await ownedSuite(this.d.db, accountId, input.eval_id);
    if (!suite) throw new ServiceError('not_found', `eval_id: no eval suite ${input.eval_id} in this account`, { param: 'eval_id' });
    const keyId = input.key_id ?? suite.key_id;
    if (!keyId) throw invalid('key_id: name the API key whose calls the monitor\'s runs are metered under (the suite has no designated key)', 'key_id');
    await this.d.evals.keyFor(accountId, keyId, input.key_id ? 'key_id' : 'eval.key_id');
    // The baseline is the suite's newest run when it ran as this monitor will (same attempts per case), else the monitor's first run.
    const last = await lastRun(this.d.db, suite.id);
    const baseline = last && last.repeat === input.repeat ? last : undefined;
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockAccount(trx, accountId, 'monitors');
      const n = await countMonitors(trx, accountId);
      if (n >= MONITORS_CAP) throw new ServiceError('conflict', `An account holds at most ${MONITORS_CAP} drift monitors and this one holds ${n}; delete one first`, { reason: 'monitor_limit', limit: MONITORS_CAP });
      return insertMonitor(trx, {
        id: newId('mon_'),
        account_id: accountId,
        eval_id: suite.id,
        key_id: keyId,
        state: 'active',
        interval_seconds: input.interval_seconds,
        threshold: input.threshold,
        drop_tolerance: input.drop_tolerance,
        repeat: input.repeat,
        baseline_rate: baseline ? measured(input.repeat, baseline) : null,
        baseline_run_id: baseline?.id ?? null,
        last_run_id: null,
        last_run_at: null,
        last_pass_rate: null,
        last_measured_rate: null,
        last_error: null,
        failure_streak: 0,
        drifting: false,
        next_run_at: new Date(now.getTime() + input.interval_seconds * 1000),
        run_claimed_by: null,
        run_started_at: null,
        created_at: now,
        updated_at: now,
      });
    });
    return view(row);
  }

  async list(accountId: string) {
    return { monitors: (await listMonitors(this.d.db, accountId, MONITORS_CAP)).map(view) };
  }

  async update(accountId: string, id: string, patch: MonitorPatch) {
    const m = await ownedMonitor(this.d.db, accountId, id);
    if (!m) throw monitorNotFound();
    const now = this.d.clock.now();
    const interval = patch.interval_seconds ?? m.interval_seconds;
    const active = patch.paused === undefined ? m.state === 'active' : !patch.paused;
    // Due one interval after its last run (or its creation), and never in the past: a run missed while paused runs once, now.
    const due = new Date(Math.max(now.getTime(), (m.last_run_at ?? m.created_at).getTime() + interval * 1000));
    const next = !active ? null : m.state === 'active' && patch.interval_seconds === undefined ? m.next_run_at : due;
    const row = await this.d.db
      .updateTable('eval_monitors')
      .set({
        state: active ? 'active' : 'paused',
        next_run_at: next,
        interval_seconds: interval,
        threshold: patch.threshold ?? m.threshold,
        drop_tolerance: patch.drop_tolerance ?? m.drop_tolerance,
        ...(patch.reset_baseline ? { baseline_rate: null, baseline_run_id: null } : {}),
        updated_at: now,
      })
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .returningAll()
      .executeTakeFirst();
    if (!row) throw monitorNotFound();
    return view(row);
  }

  async remove(accountId: string, id: string) {
    if (!(await deleteMonitor(this.d.db, accountId, id))) throw monitorNotFound();
    return { id, object: 'eval_monitor' as const, deleted: true as const };
  }

  /**
   * The leader's loop: every due monitor runs once. Its run is claimed for this process in the statement that
   * moves next_run_at, so a run is never started twice; a run whose process died (its claim names a process
   * that is gone) is recorded as interrupted by the next pass, on any process, and is not run again before
   * its next_run_at (its calls may have been charged).
   */
  async runDue(): Promise<void> {
    await this.closeInterrupted();
    const now = this.d.clock.now();
    for (const m of await dueMonitors(this.d.db, now, PER_PASS)) {
      const claimed = await claimMonitor(this.d.db, m, new Date(now.getTime() + m.interval_seconds * 1000), now, this.d.processes.processId);
      if (!claimed) continue;
      await this.d.stepFault?.('evals.monitor_claimed', m.id);
      try {
        await this.runOne(claimed);
      } catch (err) {
        this.d.log.warn({ err, monitor_id: m.id }, 'drift monitor run failed');
        await monitorRunFailed(this.d.db, m.id, 'internal_error: Internal error', this.d.clock.now(), { claimedBy: this.d.processes.processId });
      }
    }
  }

  /** Runs claimed by processes that are gone (missing at two passes in a row): recorded as interrupted, each once. */
  async closeInterrupted(): Promise<number> {
    let n = 0;
    for (const c of await goneClaims(this.gone, await claimedMonitors(this.d.db), (x) => x.run_claimed_by)) {
      if (await monitorRunFailed(this.d.db, c.id, INTERRUPTED, this.d.clock.now(), { claimedBy: c.run_claimed_by })) n++;
    }
    return n;
  }

  private async runOne(m: MonitorRow): Promise<void> {
    const suite = await ownedSuite(this.d.db, m.account_id, m.eval_id);
    if (!suite) return;
    let run: ExecutedRun;
    try {
      const p = await this.d.evals.keyFor(m.account_id, m.key_id, 'key_id');
      run = await this.d.evals.execute(suite, p, m.repeat, 'monitor', m.id);
    } catch (e) {
      if (!(e instanceof ServiceError)) throw e;
      const f = failureOf(e);
      const now = this.d.clock.now();
      await monitorRunFailed(this.d.db, m.id, `${f.type}: ${f.message}`, now, { at: now });
      return;
    }
    await this.d.db.transaction().execute(async (trx) => {
      if (!(await insertRun(trx, run.row, RUNS_CAP))) return;
      const cur = await trx.selectFrom('eval_monitors').selectAll().where('id', '=', m.id).forUpdate().executeTakeFirst();
      if (!cur) return;
      const rate = measured(cur.repeat, run.row);
      const belowThreshold = rate < cur.threshold;
      const dropped = cur.baseline_rate !== null && cur.baseline_rate - rate > cur.drop_tolerance + 1e-12;
      const drifting = belowThreshold || dropped;
      const streak = drifting ? cur.failure_streak + 1 : 0;
      await trx
        .updateTable('eval_monitors')
        .set({
          baseline_rate: cur.baseline_rate ?? rate,
          baseline_run_id: cur.baseline_run_id ?? run.row.id,
          last_run_id: run.row.id,
          last_run_at: run.row.finished_at,
          last_pass_rate: run.row.pass_rate,
          last_measured_rate: rate,
          last_error: null,
          failure_streak: streak,
          drifting,
          run_claimed_by: null,
          run_started_at: null,
          updated_at: run.row.finished_at,
        })
        .where('id', '=', cur.id)
        .execute();
      if (drifting && !cur.drifting) {
        await this.d.events.emit(
          cur.account_id,
          'eval_drift_detected',
          {
            monitor_id: cur.id,
            eval_id: cur.eval_id,
            run_id: run.row.id,
            measure: measureOf(cur.repeat),
            measured_rate: rate,
            pass_rate: run.row.pass_rate,
            pass_at_n: run.row.pass_at_n,
            pass_hat_n: run.row.pass_hat_n,
            repeat: cur.repeat,
            baseline_rate: cur.baseline_rate,
            threshold: cur.threshold,
            drop_tolerance: cur.drop_tolerance,
            reasons: [...(belowThreshold ? ['below_threshold'] : []), ...(dropped ? ['dropped'] : [])],
            failure_streak: streak,
            regressed_cases: JSON.parse(run.row.regressed_cases) as number[],
            finished_at: run.row.finished_at.toISOString(),
          },
          { db: trx },
        );
      }
    });
  }
}

function view(m: MonitorRow) {
  return {
    id: m.id,
    object: 'eval_monitor' as const,
    eval_id: m.eval_id,
    key_id: m.key_id,
    state: m.state,
    interval_seconds: m.interval_seconds,
    threshold: m.threshold,
    drop_tolerance: m.drop_tolerance,
    repeat: m.repeat,
    measure: measureOf(m.repeat),
    baseline_rate: m.baseline_rate,
    baseline_run_id: m.baseline_run_id,
    last_run_id: m.last_run_id,
    last_run_at: m.last_run_at?.toISOString() ?? null,
    last_pass_rate: m.last_pass_rate,
    last_measured_rate: m.last_measured_rate,
    last_error: m.last_error,
    failure_streak: m.failure_streak,
    drifting: m.drifting,
    next_run_at: m.next_run_at?.toISOString() ?? null,
    created_at: m.created_at.toISOString(),
  };
}
