import type { Insertable, Kysely, Selectable } from 'kysely';
import { notFound } from '@svc/shared';
import type { DB, MandatesTable } from '../../db/schema.ts';

export type MandateRow = Selectable<MandatesTable>;

/** What `GET /v1/mandates` returns at most: the newest. */
export const MANDATE_LIST_CAP = 200;

export async function insertMandate(db: Kysely<DB>, row: Insertable<MandatesTable>): Promise<MandateRow> {
  return db.insertInto('mandates').values(row).returningAll().executeTakeFirstOrThrow();
}

/** One mandate of the account (locked for the transaction with `lock`), or 404 whoever else holds the id. */
export async function mandateOf(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<MandateRow> {
  let q = db.selectFrom('mandates').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw notFound('Mandate');
  return row;
}

export async function mandateExists(db: Kysely<DB>, id: string): Promise<boolean> {
  return (await db.selectFrom('mandates').select('id').where('id', '=', id).executeTakeFirst()) !== undefined;
}

export async function listMandates(db: Kysely<DB>, accountId: string): Promise<MandateRow[]> {
  return db.selectFrom('mandates').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(MANDATE_LIST_CAP).execute();
}

/** Mandates that count against the per-account limit: neither revoked nor expired. */
export async function liveMandateCount(db: Kysely<DB>, accountId: string, now: Date): Promise<number> {
  const r = await db
    .selectFrom('mandates')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function markRevoked(db: Kysely<DB>, id: string, now: Date): Promise<void> {
  await db.updateTable('mandates').set({ revoked_at: now }).where('id', '=', id).where('revoked_at', 'is', null).execute();
}
