import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB, ServiceCallsTable, ServicesTable } from '../../db/schema.ts';

export type ServiceRow = Selectable<ServicesTable>;
export type CallRow = Selectable<ServiceCallsTable>;

/** A service with what its calls add up to: calls delivered, tokens moved to the payee (settled payments, failed calls included). */
export type ServiceStats = ServiceRow & { delivered_calls: number; revenue: string; revenue_micro_usd: number };

/** Spec document 3, Limits. */
export const DIRECTORY_CAP = 200;
export const CALLS_CAP = 100;
export const DIRECTORY_ORDER = 'delivered_calls desc, slug asc';

const stats = sql<ServiceStats>`
  select s.*, coalesce(c.delivered, 0)::bigint as delivered_calls, coalesce(c.revenue, 0)::text as revenue, coalesce(c.revenue_micro, 0)::bigint as revenue_micro_usd
  from services s left join (
    select service_id,
      count(*) filter (where status = 'delivered') as delivered,
      sum(amount::numeric) filter (where tx_hash is not null) as revenue,
      sum(amount_micro_usd) filter (where tx_hash is not null) as revenue_micro
    from service_calls group by service_id
  ) c on c.service_id = s.id`;

export async function insertService(db: Kysely<DB>, row: Insertable<ServicesTable>): Promise<ServiceRow> {
  return db.insertInto('services').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function serviceBySlug(db: Kysely<DB>, slug: string, lock = false): Promise<ServiceRow | undefined> {
  let q = db.selectFrom('services').selectAll().where('slug', '=', slug);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function withStats(db: Kysely<DB>, where: 'account' | 'directory' | 'id', value: string | number): Promise<ServiceStats[]> {
  if (where === 'account') return (await sql<ServiceStats>`${stats} where s.account_id = ${value} order by s.seq`.execute(db)).rows;
  if (where === 'id') return (await sql<ServiceStats>`${stats} where s.id = ${value}`.execute(db)).rows;
  return (
    await sql<ServiceStats>`${stats} where s.listed and s.enabled and s.status = 'active'
      order by delivered_calls desc, s.slug asc limit ${value}`.execute(db)
  ).rows;
}

export async function updateService(db: Kysely<DB>, id: string, set: Partial<ServiceRow>): Promise<void> {
  await db.updateTable('services').set(set).where('id', '=', id).execute();
}

export async function insertCall(db: Kysely<DB>, row: Insertable<ServiceCallsTable>): Promise<void> {
  await db.insertInto('service_calls').values(row).execute();
}

export async function callByPaymentId(db: Kysely<DB>, serviceId: string, paymentId: string): Promise<CallRow | undefined> {
  return db.selectFrom('service_calls').selectAll().where('service_id', '=', serviceId).where('payment_id', '=', paymentId).executeTakeFirst();
}

export async function callByAuthorization(db: Kysely<DB>, chainId: number, asset: string, payer: string, nonce: string): Promise<CallRow | undefined> {
  return db
    .selectFrom('service_calls')
    .selectAll()
    .where('chain_id', '=', chainId)
    .where('asset', '=', asset)
    .where('payer', '=', payer)
    .where('nonce', '=', nonce)
    .executeTakeFirst();
}

export async function updateCall(db: Kysely<DB>, id: string, set: Partial<CallRow>): Promise<void> {
  await db.updateTable('service_calls').set(set).where('id', '=', id).execute();
}

/** A call's error while its payment was submitted but not confirmed in time; a retry of the same payment resumes it. */
export const UNCONFIRMED = 'settlement_unconfirmed';

/** Takes a call left unconfirmed, now confirmed, for delivery: false when another retry took it first. */
export async function takeUnconfirmed(db: Kysely<DB>, id: string, settled: { txHash: string; blockNumber: number }, now: Date): Promise<boolean> {
  const r = await db
    .updateTable('service_calls')
    .set({ error_type: null, error_message: null, tx_hash: settled.txHash, block_number: settled.blockNumber, settled_at: now })
    .where('id', '=', id)
    .where('status', '=', 'settling')
    .where('error_type', '=', UNCONFIRMED)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Drops a claim whose payment never moved (refused or reverted at settlement), so nothing half-written stays. */
export async function dropClaim(db: Kysely<DB>, id: string): Promise<void> {
  await db.deleteFrom('service_calls').where('id', '=', id).where('status', '=', 'settling').execute();
}

export async function recentCalls(db: Kysely<DB>, serviceId: string): Promise<CallRow[]> {
  return db.selectFrom('service_calls').selectAll().where('service_id', '=', serviceId).orderBy('seq', 'desc').limit(CALLS_CAP).execute();
}
