import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DarkpoolIntentsTable, DarkpoolMatchesTable, DB } from '../../db/schema.ts';

export type IntentRow = Selectable<DarkpoolIntentsTable>;
export type MatchRow = Selectable<DarkpoolMatchesTable>;

export async function insertIntent(db: Kysely<DB>, row: Insertable<DarkpoolIntentsTable>): Promise<IntentRow> {
  return db.insertInto('darkpool_intents').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Appends an entry to an intent's history (the caller holds the intent's row lock or just made it). */
export async function appendHistory(db: Kysely<DB>, intent: { id: string; history_count: number }, type: string, at: Date, data: Record<string, unknown>): Promise<void> {
  await db.insertInto('darkpool_intent_events').values({ intent_id: intent.id, seq: intent.history_count, type, at, data: JSON.stringify(data) }).execute();
  await db.updateTable('darkpool_intents').set({ history_count: intent.history_count + 1 }).where('id', '=', intent.id).execute();
  intent.history_count++;
}

export async function history(db: Kysely<DB>, intentId: string) {
  return db.selectFrom('darkpool_intent_events').select(['seq', 'type', 'at', 'data']).where('intent_id', '=', intentId).orderBy('seq').execute();
}

/** One intent of the account (locked with `lock`), or undefined: another account's intent is not found either. */
export async function ownedIntent(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<IntentRow | undefined> {
  let q = db.selectFrom('darkpool_intents').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function intentById(db: Kysely<DB>, id: string, lock = false): Promise<IntentRow | undefined> {
  let q = db.selectFrom('darkpool_intents').selectAll().where('id', '=', id);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function restingCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('darkpool_intents').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).where('state', '=', 'resting').executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Resting intents in one side of one book, oldest first (other accounts' only), locked with `lock`. */
export async function restingIn(db: Kysely<DB>, bookKey: string, notAccount: string, limit: number, lock = false): Promise<IntentRow[]> {
  let q = db
    .selectFrom('darkpool_intents')
    .selectAll()
    .where('book_key', '=', bookKey)
    .where('state', '=', 'resting')
    .where('account_id', '!=', notAccount)
    .orderBy('seq')
    .limit(limit);
  if (lock) q = q.forUpdate();
  return q.execute();
}

/** The account's intents in one market, newest first. */
export async function intentsInMarket(db: Kysely<DB>, accountId: string, assetKey: string, limit: number): Promise<IntentRow[]> {
  return db.selectFrom('darkpool_intents').selectAll().where('account_id', '=', accountId).where('asset_key', '=', assetKey).orderBy('seq', 'desc').limit(limit).execute();
}

export async function insertMatch(db: Kysely<DB>, row: Insertable<DarkpoolMatchesTable>): Promise<MatchRow> {
  return db.insertInto('darkpool_matches').values(row).returningAll().executeTakeFirstOrThrow();
}

/** A match the account is party to (either side), locked with `lock`. */
export async function partyMatch(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<MatchRow | undefined> {
  let q = db
    .selectFrom('darkpool_matches')
    .selectAll()
    .where('id', '=', id)
    .where((eb) => eb.or([eb('buyer_account_id', '=', accountId), eb('seller_account_id', '=', accountId)]));
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}
