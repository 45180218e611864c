import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { MemoryCollectionsTable } from '../../db/schema-memory.ts';

export type CollectionRow = Selectable<MemoryCollectionsTable>;

/** Serialises the collection creations of one account (the per-account cap), without locking another module's rows. */
export async function lockAccount(db: Kysely<DB>, accountId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`memory:${accountId}`}))`.execute(db);
}

export async function countCollections(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('memory_collections').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function insertCollection(db: Kysely<DB>, row: Insertable<MemoryCollectionsTable>): Promise<CollectionRow> {
  return db.insertInto('memory_collections').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function listCollections(db: Kysely<DB>, accountId: string, cap: number): Promise<CollectionRow[]> {
  return db.selectFrom('memory_collections').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(cap).execute();
}

/** A collection of the account, or undefined (another account's is not found either); `lock` takes its row for the transaction. */
export async function ownedCollection(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<CollectionRow | undefined> {
  const q = db.selectFrom('memory_collections').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  return (lock ? q.forUpdate() : q).executeTakeFirst();
}

/** Records a stored document on its collection: the dimension (set by the first), one more document, `chunks` more chunks. */
export async function recordDocument(db: Kysely<DB>, id: string, dims: number, chunks: number, now: Date): Promise<CollectionRow> {
  return db
    .updateTable('memory_collections')
    .set((eb) => ({ dimensions: dims, documents: eb('documents', '+', 1), chunks: eb('chunks', '+', chunks), updated_at: now }))
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Deletes a collection of the account with every chunk (sealed text and vector); null when there was no such collection. */
export async function deleteCollection(db: Kysely<DB>, accountId: string, id: string): Promise<{ documents: number; chunks: number } | null> {
  return db.transaction().execute(async (trx) => {
    const row = await ownedCollection(trx, accountId, id, true);
    if (!row) return null;
    const chunks = await trx.deleteFrom('memory_chunks').where('collection_id', '=', id).executeTakeFirst();
    await trx.deleteFrom('memory_collections').where('id', '=', id).execute();
    return { documents: row.documents, chunks: Number(chunks.numDeletedRows) };
  });
}
