import { sql, type Kysely, type Selectable } from 'kysely';
import type { DB, GuardrailsTable } from '../../db/schema.ts';

export type GuardrailRow = Selectable<GuardrailsTable>;

export async function insertGuardrail(db: Kysely<DB>, row: Omit<GuardrailRow, 'seq' | 'detectors'> & { detectors: string }): Promise<void> {
  await db.insertInto('guardrails').values(row).execute();
}

/** Serialises rule-set writes of one account (the per-account limit), without locking another module's rows. */
export async function lockAccount(db: Kysely<DB>, accountId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`guardrails:${accountId}`}))`.execute(db);
}

export async function countGuardrails(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('guardrails').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function listGuardrails(db: Kysely<DB>, accountId: string, cap: number): Promise<GuardrailRow[]> {
  return db.selectFrom('guardrails').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(cap).execute();
}

/** The account's rule sets among `ids` (another account's and deleted ones are left out). */
export async function guardrailsOf(db: Kysely<DB>, accountId: string, ids: readonly string[]): Promise<GuardrailRow[]> {
  if (ids.length === 0) return [];
  return db.selectFrom('guardrails').selectAll().where('account_id', '=', accountId).where('id', 'in', [...ids]).execute();
}

export async function deleteGuardrail(db: Kysely<DB>, accountId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('guardrails').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** The account's newest receipts (payload text), newest first. */
export async function newestReceipts(db: Kysely<DB>, accountId: string, limit: number): Promise<Array<{ id: string; payload: string; created_at: Date }>> {
  return db.selectFrom('receipts').select(['id', 'payload', 'created_at']).where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(limit).execute();
}
