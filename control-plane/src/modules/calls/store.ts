import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB, SealedCallsTable } from '../../db/schema.ts';

export type CallRow = Selectable<SealedCallsTable>;
/** A row without its sealed columns: what lists and withdrawals read. */
export type CallMeta = Omit<CallRow, 'text_sealed' | 'salt_sealed'>;

const META = [
  'id',
  'seq',
  'account_id',
  'key_id',
  'state',
  'commitment',
  'receipt_id',
  'receipt_payload',
  'receipt_hash',
  'receipt_signature',
  'created_at',
  'revealed_at',
  'withdrawn_at',
] as const;

export async function insertCall(db: Kysely<DB>, row: Insertable<SealedCallsTable>): Promise<CallMeta> {
  return db.insertInto('sealed_calls').values(row).returning(META).executeTakeFirstOrThrow();
}

export async function callCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('sealed_calls').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Sealed calls of every account (the explorer's total). */
export async function allCallsCount(db: Kysely<DB>): Promise<number> {
  const r = await db.selectFrom('sealed_calls').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}

/** The account's calls, newest first. */
export async function listCalls(db: Kysely<DB>, accountId: string, limit: number): Promise<CallMeta[]> {
  return db.selectFrom('sealed_calls').select(META).where('account_id', '=', accountId).orderBy('seq', 'desc').limit(limit).execute();
}

/** One call of the account (content-free), or undefined: another account's call is not found either. */
export async function ownedCall(db: Kysely<DB>, accountId: string, id: string): Promise<CallMeta | undefined> {
  return db.selectFrom('sealed_calls').select(META).where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** Any call by id, sealed columns included (the public view opens them only once revealed). */
export async function callById(db: Kysely<DB>, id: string): Promise<CallRow | undefined> {
  return db.selectFrom('sealed_calls').selectAll().where('id', '=', id).executeTakeFirst();
}

/**
 * Marks a committed or revealed call of the account revealed (the first revealed_at kept) and returns it
 * with its sealed columns; undefined when it is missing, another account's, or withdrawn. One statement: a
 * withdrawal running at the same moment is either before it (nothing returned) or after it.
 */
export async function markRevealed(db: Kysely<DB>, accountId: string, id: string, at: Date): Promise<CallRow | undefined> {
  return db
    .updateTable('sealed_calls')
    .set((eb) => ({ state: 'revealed' as const, revealed_at: eb.fn.coalesce('revealed_at', eb.val(at)) }))
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .where('state', 'in', ['committed', 'revealed'])
    .returningAll()
    .executeTakeFirst();
}

/**
 * Withdraws a call of the account: the state and the destruction of text and salt in one statement (the
 * first withdrawn_at kept, so withdrawing again changes nothing). Commitment and receipt stay.
 */
export async function markWithdrawn(db: Kysely<DB>, accountId: string, id: string, at: Date): Promise<CallMeta | undefined> {
  return db
    .updateTable('sealed_calls')
    .set((eb) => ({ state: 'withdrawn' as const, text_sealed: null, salt_sealed: null, withdrawn_at: eb.fn.coalesce('withdrawn_at', eb.val(at)) }))
    .where('id', '=', id)
    .where('account_id', '=', accountId)
    .returning(META)
    .executeTakeFirst();
}
