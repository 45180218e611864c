import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

/**
 * Locks an account's row for the rest of `db`'s transaction; false when there is no such account.
 *
 * `FOR NO KEY UPDATE`: lockers exclude one another (every per-account limit built on this lock holds), while
 * rows that reference the account (a hold, a ledger entry, a wallet) can still be inserted by other transactions.
 * `FOR UPDATE` would also block those inserts' foreign-key checks, and a transaction holding the account's lock
 * and waiting for the account's credit row would deadlock with a hold that took the credit row and inserts its row.
 */
export async function lockAccountRow(db: Kysely<DB>, accountId: string): Promise<boolean> {
  const a = await db.selectFrom('accounts').select('id').where('id', '=', accountId).forNoKeyUpdate().executeTakeFirst();
  return a !== undefined;
}
