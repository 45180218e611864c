import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ArenaRunsTable } from '../../db/schema-arena.ts';

export type RunRow = Selectable<ArenaRunsTable>;

export const insertRun = (db: Kysely<DB>, row: Insertable<ArenaRunsTable>) => db.insertInto('arena_runs').values(row).returningAll().executeTakeFirstOrThrow();

export const runById = (db: Kysely<DB>, id: string) => db.selectFrom('arena_runs').selectAll().where('id', '=', id).executeTakeFirst();

/** When the pair last ran (any outcome): the cadence counts from it. */
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
