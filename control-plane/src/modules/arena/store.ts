import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ArenaLiveTable, ArenaRunsTable, ArenaTaskResult } from '../../db/schema-arena.ts';

export type RunRow = Selectable<ArenaRunsTable>;
export type LiveRow = Selectable<ArenaLiveTable>;

export const runById = (db: Kysely<DB>, id: string) => db.selectFrom('arena_runs').selectAll().where('id', '=', id).executeTakeFirst();

/** When the pair last ran (any outcome, interrupted ones too): the cadence counts from it. */
export async function lastStarted(db: Kysely<DB>, suite: string, model: string): Promise<Date | null> {
  const r = await db.selectFrom('arena_runs').select('started_at').where('suite_slug', '=', suite).where('model', '=', model).orderBy('seq', 'desc').limit(1).executeTakeFirst();
  return r?.started_at ?? null;
}

/** The newest completed, fully receipted run of a pair over the suite's current tasks. */
export const latestReceipted = (db: Kysely<DB>, suite: string, model: string, tasksSha256: string) =>
  db
    .selectFrom('arena_runs')
    .selectAll()
    .where('suite_slug', '=', suite)
    .where('model', '=', model)
    .where('tasks_sha256', '=', tasksSha256)
    .where('state', '=', 'completed')
    .where('receipted', '=', true)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();

/** Marks the pair's run under way (before its first task); false when a run of the pair is under way already. */
export async function startLive(db: Kysely<DB>, row: Insertable<ArenaLiveTable>): Promise<boolean> {
  const r = await db.insertInto('arena_live').values(row).onConflict((oc) => oc.columns(['suite_slug', 'model']).doNothing()).executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
}

/** The tasks a run under way has done so far. */
export async function progressLive(db: Kysely<DB>, runId: string, results: ArenaTaskResult[]): Promise<void> {
  await db.updateTable('arena_live').set({ results: JSON.stringify(results) }).where('run_id', '=', runId).execute();
}

export const liveRuns = (db: Kysely<DB>) => db.selectFrom('arena_live').selectAll().execute();

/**
 * Writes an ended run in place of its mark, in one transaction; with `processId`, only while the mark is still
 * that process's (undefined otherwise: the run was closed as interrupted meanwhile, or written already).
 */
export async function endRun(db: Kysely<DB>, row: Insertable<ArenaRunsTable>, processId?: string): Promise<RunRow | undefined> {
  return db.transaction().execute(async (trx) => {
    let gone = trx.deleteFrom('arena_live').where('run_id', '=', row.id);
    if (processId !== undefined) gone = gone.where('process_id', '=', processId);
    if (Number((await gone.executeTakeFirst()).numDeletedRows) !== 1) return undefined;
    return trx.insertInto('arena_runs').values(row).returningAll().executeTakeFirstOrThrow();
  });
}
