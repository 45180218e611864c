import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB, NavRecordsTable } from '../../db/schema.ts';

export type NavRow = Selectable<NavRecordsTable>;

/** Who holds an asset id, if anyone. */
export async function assetOwner(db: Kysely<DB>, assetId: string): Promise<string | null> {
  const r = await db.selectFrom('nav_assets').select('account_id').where('asset_id', '=', assetId).executeTakeFirst();
  return r?.account_id ?? null;
}

/**
 * Claims an asset id for the account (the first calculation) and locks it, so versions of one asset are
 * numbered one at a time; returns the holder, which is another account when the id is taken.
 */
export async function claimAndLock(db: Kysely<DB>, assetId: string, accountId: string, now: Date): Promise<string> {
  await db.insertInto('nav_assets').values({ asset_id: assetId, account_id: accountId, created_at: now }).onConflict((oc) => oc.column('asset_id').doNothing()).execute();
  const r = await db.selectFrom('nav_assets').select('account_id').where('asset_id', '=', assetId).forUpdate().executeTakeFirstOrThrow();
  return r.account_id;
}

export function latest(db: Kysely<DB>, assetId: string): Promise<NavRow | undefined> {
  return db.selectFrom('nav_records').selectAll().where('asset_id', '=', assetId).orderBy('version', 'desc').limit(1).executeTakeFirst();
}

export function byId(db: Kysely<DB>, assetId: string, navId: string): Promise<NavRow | undefined> {
  return db.selectFrom('nav_records').selectAll().where('asset_id', '=', assetId).where('id', '=', navId).executeTakeFirst();
}

export async function insertNav(db: Kysely<DB>, row: Insertable<NavRecordsTable>): Promise<NavRow> {
  return db.insertInto('nav_records').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Publishes a version once (publishing again changes nothing); returns it, or undefined when unknown. */
export async function markPublished(db: Kysely<DB>, assetId: string, navId: string, now: Date): Promise<NavRow | undefined> {
  await db.updateTable('nav_records').set({ published_at: now }).where('asset_id', '=', assetId).where('id', '=', navId).where('published_at', 'is', null).execute();
  return byId(db, assetId, navId);
}

/** Published versions of an asset, newest first; with `navId`, that one only. */
export function published(db: Kysely<DB>, assetId: string, limit: number, navId?: string): Promise<NavRow[]> {
  let q = db.selectFrom('nav_records').selectAll().where('asset_id', '=', assetId).where('published_at', 'is not', null);
  if (navId !== undefined) q = q.where('id', '=', navId);
  return q.orderBy('version', 'desc').limit(limit).execute();
}

export async function publishedCount(db: Kysely<DB>): Promise<number> {
  const r = await db.selectFrom('nav_records').select((eb) => eb.fn.countAll<string>().as('n')).where('published_at', 'is not', null).executeTakeFirstOrThrow();
  return Number(r.n);
}
