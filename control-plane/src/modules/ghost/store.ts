import type { Insertable, Kysely, Selectable } from 'kysely';
import { notFound } from '@svc/shared';
import type { DB, GhostSessionsTable } from '../../db/schema.ts';

export type GhostRow = Selectable<GhostSessionsTable>;

/** What `GET /v1/ghost/sessions` returns at most: the newest. */
export const GHOST_LIST_CAP = 100;

export async function insertGhost(db: Kysely<DB>, row: Insertable<GhostSessionsTable>): Promise<GhostRow> {
  return db.insertInto('ghost_sessions').values(row).returningAll().executeTakeFirstOrThrow();
}

/** One ghost of the account (locked with `lock`); unknown, purged and another account's are the same 404. */
export async function ghostOf(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<GhostRow> {
  let q = db.selectFrom('ghost_sessions').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound('Ghost session');
  return row;
}

export async function listGhosts(db: Kysely<DB>, accountId: string): Promise<GhostRow[]> {
  return db.selectFrom('ghost_sessions').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(GHOST_LIST_CAP).execute();
}

export async function liveGhostCount(db: Kysely<DB>, accountId: string, now: Date): Promise<number> {
  const r = await db
    .selectFrom('ghost_sessions')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('expires_at', '>', now)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function setGhostExpiry(db: Kysely<DB>, id: string, expiresAt: Date): Promise<GhostRow> {
  return db.updateTable('ghost_sessions').set({ expires_at: expiresAt }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function deleteGhost(db: Kysely<DB>, id: string): Promise<void> {
  await db.deleteFrom('ghost_sessions').where('id', '=', id).execute();
}

/** Deletes the metadata of ghosts that expired; returns how many. */
export async function purgeExpiredGhosts(db: Kysely<DB>, now: Date): Promise<number> {
  const r = await db.deleteFrom('ghost_sessions').where('expires_at', '<=', now).executeTakeFirst();
  return Number(r.numDeletedRows);
}
