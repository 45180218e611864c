import type { Kysely, Selectable } from 'kysely';
import type { DB, SourceSetsTable } from '../../db/schema.ts';
import type { Member } from './root.ts';

export type SetRow = Selectable<SourceSetsTable>;

/** The columns every view of a set reads (not `seq`, which only orders lists). */
const SET_COLUMNS = ['id', 'account_id', 'root', 'member_count', 'created_at', 'deleted_at'] as const;
export type SetFields = Pick<SetRow, (typeof SET_COLUMNS)[number]>;

/** A set and its members, already in root order (positions 0..n-1). */
export async function insertSet(db: Kysely<DB>, set: Omit<SetFields, 'deleted_at'>, ordered: readonly Member[]): Promise<void> {
  await db.insertInto('source_sets').values({ ...set, deleted_at: null }).execute();
  await db
    .insertInto('source_set_members')
    .values(ordered.map((m, position) => ({ set_id: set.id, position, label: m.label, sha256: m.sha256, byte_len: m.byte_len })))
    .execute();
}

/** A live (not taken down) set; with `accountId`, only that account's. One primary-key lookup. */
export async function liveSet(db: Kysely<DB>, id: string, accountId?: string): Promise<SetFields | undefined> {
  let q = db.selectFrom('source_sets').select(SET_COLUMNS).where('id', '=', id).where('deleted_at', 'is', null);
  if (accountId !== undefined) q = q.where('account_id', '=', accountId);
  return q.executeTakeFirst();
}

/** The root of the account's live set, for a call that cites it (the inference routes' one read). */
export async function liveRoot(db: Kysely<DB>, id: string, accountId: string): Promise<string | undefined> {
  const r = await db.selectFrom('source_sets').select('root').where('id', '=', id).where('account_id', '=', accountId).where('deleted_at', 'is', null).executeTakeFirst();
  return r?.root;
}

/** The stored members in root order, as they are now. */
export async function membersOf(db: Kysely<DB>, setId: string): Promise<Member[]> {
  return db.selectFrom('source_set_members').select(['label', 'sha256', 'byte_len']).where('set_id', '=', setId).orderBy('position').execute();
}

/** The account's live sets, newest first, at most `cap`. */
export async function listSets(db: Kysely<DB>, accountId: string, cap: number): Promise<SetFields[]> {
  return db
    .selectFrom('source_sets')
    .select(SET_COLUMNS)
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .orderBy('seq', 'desc')
    .limit(cap)
    .execute();
}

/** Stamps the account's live set as taken down and deletes its members; undefined when there was none. */
export async function takeDown(db: Kysely<DB>, id: string, accountId: string, now: Date): Promise<SetFields | undefined> {
  const row = await db
    .updateTable('source_sets')
    .set({ deleted_at: now })
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('deleted_at', 'is', null)
    .returning(SET_COLUMNS)
    .executeTakeFirst();
  if (row) await db.deleteFrom('source_set_members').where('set_id', '=', id).execute();
  return row;
}
