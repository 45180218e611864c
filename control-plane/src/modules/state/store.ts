import { sql, type ExpressionBuilder, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB, StateValuesTable } from '../../db/schema.ts';

export type StateRow = Selectable<StateValuesTable>;
/** A row without its sealed value: what writes, deletes and listings read. */
export type StateMeta = Omit<StateRow, 'value_sealed'>;

const META = ['account_id', 'namespace', 'key', 'version', 'size', 'created_at', 'updated_at'] as const;

export interface Place {
  accountId: string;
  namespace: string;
  key: string;
}

const at = (p: Place) => (eb: ExpressionBuilder<DB, 'state_values'>) => eb.and({ account_id: p.accountId, namespace: p.namespace, key: p.key });

/** The value at `p`, sealed column included, or undefined. */
export async function readValue(db: Kysely<DB>, p: Place): Promise<StateRow | undefined> {
  return db.selectFrom('state_values').selectAll().where(at(p)).executeTakeFirst();
}

/** The value's metadata, its row locked until the transaction ends (writers of one key run one at a time). */
export async function lockValue(trx: Kysely<DB>, p: Place): Promise<StateMeta | undefined> {
  return trx.selectFrom('state_values').select(META).where(at(p)).forUpdate().executeTakeFirst();
}

export async function insertValue(trx: Kysely<DB>, row: Insertable<StateValuesTable>): Promise<StateMeta> {
  return trx.insertInto('state_values').values(row).returning(META).executeTakeFirstOrThrow();
}

export async function updateValue(trx: Kysely<DB>, p: Place, set: { version: number; value_sealed: Uint8Array; size: number; updated_at: Date }): Promise<StateMeta> {
  return trx.updateTable('state_values').set(set).where(at(p)).returning(META).executeTakeFirstOrThrow();
}

/** Deletes the value and raises the account's version floor to its version, in the caller's transaction. */
export async function deleteValue(trx: Kysely<DB>, p: Place, version: number): Promise<void> {
  await trx.deleteFrom('state_values').where(at(p)).execute();
  await trx
    .insertInto('state_version_floors')
    .values({ account_id: p.accountId, version })
    .onConflict((oc) => oc.column('account_id').doUpdateSet({ version: sql<number>`greatest(state_version_floors.version, excluded.version)` }))
    .execute();
}

/** The highest version the account has deleted (0 when none): a key created now starts above it. */
export async function versionFloor(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('state_version_floors').select('version').where('account_id', '=', accountId).executeTakeFirst();
  return r ? Number(r.version) : 0;
}

export async function accountKeyCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('state_values').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

/**
 * The namespace's first `limit` keys in byte order (the columns' collation "C"), without values, and how many
 * keys it holds in all, read in one statement.
 */
export async function listKeys(db: Kysely<DB>, accountId: string, namespace: string, limit: number): Promise<{ rows: StateMeta[]; total: number }> {
  const rows = await db
    .selectFrom('state_values')
    .select([...META, sql<number>`count(*) over ()`.as('total')])
    .where('account_id', '=', accountId)
    .where('namespace', '=', namespace)
    .orderBy('key')
    .limit(limit)
    .execute();
  return { rows: rows.map(({ total: _, ...r }) => r), total: rows.length ? Number(rows[0]!.total) : 0 };
}
