import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { EvalMonitorsTable, EvalRunsTable, EvalSuitesTable } from '../../db/schema-quality.ts';

export type SuiteRow = Selectable<EvalSuitesTable>;
export type RunRow = Selectable<EvalRunsTable>;
export type MonitorRow = Selectable<EvalMonitorsTable>;

/** Serialises the quality writes of one account that a per-account cap bounds (suites, monitors). */
export async function lockAccount(db: Kysely<DB>, accountId: string, what: 'evals' | 'monitors'): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`${what}:${accountId}`}))`.execute(db);
}

export async function countSuites(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('eval_suites').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function insertSuite(db: Kysely<DB>, row: Insertable<EvalSuitesTable>): Promise<SuiteRow> {
  return db.insertInto('eval_suites').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function listSuites(db: Kysely<DB>, accountId: string, cap: number): Promise<SuiteRow[]> {
  return db.selectFrom('eval_suites').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(cap).execute();
}

/** A suite of the account, or undefined (another account's suite is not found either). */
export async function ownedSuite(db: Kysely<DB>, accountId: string, id: string): Promise<SuiteRow | undefined> {
  return db.selectFrom('eval_suites').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** Deletes a suite of the account with its runs and monitors; the number of monitors it had, or null when there was no such suite. */
export async function deleteSuite(db: Kysely<DB>, accountId: string, id: string): Promise<number | null> {
  return db.transaction().execute(async (trx) => {
    const monitors = await trx.deleteFrom('eval_monitors').where('eval_id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    const r = await trx.deleteFrom('eval_suites').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    return Number(r.numDeletedRows) > 0 ? Number(monitors.numDeletedRows) : null;
  });
}

/** The newest run of each suite among `ids`. */
export async function lastRuns(db: Kysely<DB>, ids: readonly string[]): Promise<Map<string, RunRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('eval_runs')
    .selectAll()
    .where('eval_id', 'in', [...ids])
    .where('seq', 'in', (eb) => eb.selectFrom('eval_runs').select((x) => x.fn.max('seq').as('m')).where('eval_id', 'in', [...ids]).groupBy('eval_id'))
    .execute();
  return new Map(rows.map((r) => [r.eval_id, r]));
}

export async function lastRun(db: Kysely<DB>, evalId: string): Promise<RunRow | undefined> {
  return db.selectFrom('eval_runs').selectAll().where('eval_id', '=', evalId).orderBy('seq', 'desc').limit(1).executeTakeFirst();
}

export async function listRuns(db: Kysely<DB>, evalId: string, cap: number): Promise<RunRow[]> {
  return db.selectFrom('eval_runs').selectAll().where('eval_id', '=', evalId).orderBy('seq', 'desc').limit(cap).execute();
}

/** Records a run and drops the suite's runs beyond its `keep` newest. False when the suite was deleted meanwhile. */
export async function insertRun(db: Kysely<DB>, row: Insertable<EvalRunsTable>, keep: number): Promise<boolean> {
  const suite = await db.selectFrom('eval_suites').select('id').where('id', '=', row.eval_id).forUpdate().executeTakeFirst();
  if (!suite) return false;
  await db.insertInto('eval_runs').values(row).execute();
  const cut = await db.selectFrom('eval_runs').select('seq').where('eval_id', '=', row.eval_id).orderBy('seq', 'desc').offset(keep).limit(1).executeTakeFirst();
  if (cut) await db.deleteFrom('eval_runs').where('eval_id', '=', row.eval_id).where('seq', '<=', cut.seq).execute();
  return true;
}

export async function countMonitors(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('eval_monitors').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function insertMonitor(db: Kysely<DB>, row: Insertable<EvalMonitorsTable>): Promise<MonitorRow> {
  return db.insertInto('eval_monitors').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function listMonitors(db: Kysely<DB>, accountId: string, cap: number): Promise<MonitorRow[]> {
  return db.selectFrom('eval_monitors').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(cap).execute();
}

export async function ownedMonitor(db: Kysely<DB>, accountId: string, id: string): Promise<MonitorRow | undefined> {
  return db.selectFrom('eval_monitors').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

export async function deleteMonitor(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('eval_monitors').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** Active monitors whose next run is due, the longest overdue first. */
export async function dueMonitors(db: Kysely<DB>, now: Date, limit: number): Promise<MonitorRow[]> {
  return db
    .selectFrom('eval_monitors')
    .selectAll()
    .where('state', '=', 'active')
    .where('next_run_at', '<=', now)
    .where('run_claimed_by', 'is', null)
    .orderBy('next_run_at')
    .orderBy('seq')
    .limit(limit)
    .execute();
}

/**
 * Takes a due monitor's run for the process `processId`: moves its next run to `next` (now plus its interval,
 * however many intervals passed while no leader ran, so a missed run is caught up once) and marks the run
 * under way by that process, in one statement. Undefined when another pass took it, or it was paused,
 * changed or deleted meanwhile.
 */
export async function claimMonitor(db: Kysely<DB>, m: MonitorRow, next: Date, now: Date, processId: string): Promise<MonitorRow | undefined> {
  return db
    .updateTable('eval_monitors')
    .set({ next_run_at: next, run_claimed_by: processId, run_started_at: now, updated_at: now })
    .where('id', '=', m.id)
    .where('state', '=', 'active')
    .where('next_run_at', '=', m.next_run_at)
    .where('run_claimed_by', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

/** Monitors whose run is under way, with the process running it. */
export async function claimedMonitors(db: Kysely<DB>): Promise<Array<{ id: string; run_claimed_by: string }>> {
  const rows = await db.selectFrom('eval_monitors').select(['id', 'run_claimed_by']).where('run_claimed_by', 'is not', null).execute();
  return rows as Array<{ id: string; run_claimed_by: string }>;
}

/**
 * Records a monitor's run that ended without a result (`error`, as `type: message`): the streak of failures
 * grows, the claim is cleared. With `claimedBy`, only while that process still holds the claim. The run counts
 * as of `at` (default: when it started).
 */
export async function monitorRunFailed(db: Kysely<DB>, id: string, error: string, now: Date, opts: { at?: Date; claimedBy?: string } = {}): Promise<boolean> {
  const claimedBy = opts.claimedBy;
  let q = db
    .updateTable('eval_monitors')
    .set({
      last_error: error.slice(0, 1000),
      last_run_at: opts.at ?? sql<Date>`coalesce(run_started_at, ${now})`,
      failure_streak: sql<number>`failure_streak + 1`,
      run_claimed_by: null,
      run_started_at: null,
      updated_at: now,
    })
    .where('id', '=', id);
  if (claimedBy !== undefined) q = q.where('run_claimed_by', '=', claimedBy);
  const r = await q.executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}
