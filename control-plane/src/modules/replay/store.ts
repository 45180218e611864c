import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ReplayCapsulesTable, ReplayRunsTable } from '../../db/schema-replay.ts';

export type CapsuleRow = Selectable<ReplayCapsulesTable>;
export type RunRow = Selectable<ReplayRunsTable>;

export async function lockCapsules(db: Kysely<DB>, accountId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`replay:${accountId}`}))`.execute(db);
}

export async function countCapsules(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('replay_capsules').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export const insertCapsule = (db: Kysely<DB>, row: Insertable<ReplayCapsulesTable>) => db.insertInto('replay_capsules').values(row).returningAll().executeTakeFirstOrThrow();

export const ownedCapsule = (db: Kysely<DB>, accountId: string, id: string) => db.selectFrom('replay_capsules').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();

export const listCapsules = (db: Kysely<DB>, accountId: string, cap: number) => db.selectFrom('replay_capsules').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(cap).execute();

export const listRuns = (db: Kysely<DB>, capsuleId: string, cap: number) => db.selectFrom('replay_runs').selectAll().where('capsule_id', '=', capsuleId).orderBy('seq', 'desc').limit(cap).execute();

/** Nulls the sealed request; the row stays. Returns the row (as it was when already deleted). */
export async function destroyRequest(db: Kysely<DB>, accountId: string, id: string, now: Date): Promise<CapsuleRow | undefined> {
  const done = await db.updateTable('replay_capsules').set({ request_sealed: null, deleted_at: now }).where('id', '=', id).where('account_id', '=', accountId).where('deleted_at', 'is', null).returningAll().executeTakeFirst();
  return done ?? ownedCapsule(db, accountId, id);
}

/** Records a replay, counts it on its capsule and keeps the capsule's newest `kept` replays. */
export async function insertRun(db: Kysely<DB>, row: Insertable<ReplayRunsTable>, kept: number): Promise<RunRow> {
  const run = await db.insertInto('replay_runs').values(row).returningAll().executeTakeFirstOrThrow();
  await db
    .updateTable('replay_capsules')
    .set((eb) => ({ replay_count: eb('replay_count', '+', 1), changed_count: eb('changed_count', '+', row.changed ? 1 : 0), last_replayed_at: row.created_at }))
    .where('id', '=', row.capsule_id)
    .execute();
  await sql`delete from replay_runs where capsule_id = ${row.capsule_id} and seq < (select min(seq) from (select seq from replay_runs where capsule_id = ${row.capsule_id} order by seq desc limit ${kept}) newest)`.execute(db);
  return run;
}
