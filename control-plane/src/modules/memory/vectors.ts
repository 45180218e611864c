import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

/**
 * Where chunk vectors live and how search finds the nearest ones, in the database either way:
 * - `indexed`: pgvector. `embedding` is an untyped `vector`; each dimension in use gets one HNSW index (cosine),
 *   a partial expression index `((embedding::vector(D)) vector_cosine_ops) where dims = D`, created the first
 *   time a collection of that dimension stores a chunk. Search orders by `embedding::vector(D) <=> query`,
 *   the expression the index holds, with hnsw.iterative_scan so a collection filter still fills k results.
 *   Dimensions above HNSW's 2000 have no index and are scanned exactly with the same operator.
 * - `exact`: no pgvector (`create extension vector` unavailable): `embedding` is `real[]` and search computes
 *   every chunk's similarity in SQL (memory_dot) and sorts. Same query, same results, slower at scale.
 * Vectors are stored at unit length, so cosine similarity is their dot product and distance = 1 - similarity.
 */
export type VectorMode = 'indexed' | 'exact';

/** HNSW build and search parameters (see bench/memory.ts for the recall and latency they give). */
export const HNSW = { m: 16, efConstruction: 64, efSearch: 40 } as const;
/** The most dimensions pgvector's HNSW indexes (for `vector`). */
export const MAX_INDEXED_DIMS = 2000;
/** The most dimensions a pgvector `vector` holds. */
export const MAX_DIMS = 16_000;

export interface ChunkRow {
  collection_id: string;
  document_id: string;
  chunk_index: number;
  text_sealed: Uint8Array;
  /** Unit length (see `unit`). */
  vector: number[];
}

export interface NearRow {
  document_id: string;
  chunk_index: number;
  text_sealed: Uint8Array;
  distance: number;
}

/** The vector scaled to unit length; null for a zero (or non-finite) vector, which has no direction. */
export function unit(v: readonly number[]): number[] | null {
  let s = 0;
  for (const x of v) s += x * x;
  const n = Math.sqrt(s);
  if (!(n > 0) || !Number.isFinite(n)) return null;
  return v.map((x) => x / n);
}

const dimsSql = (dims: number) => {
  if (!Number.isSafeInteger(dims) || dims < 1 || dims > MAX_DIMS) throw new Error(`bad dimension ${dims}`);
  return sql.raw(String(dims));
};

export class VectorStore {
  private detected: VectorMode | null = null;
  private readonly indexed = new Set<number>();

  constructor(private readonly db: Kysely<DB>) {}

  /** Which form the migration gave `embedding` (read once): a `vector` column, or `real[]`. */
  async mode(): Promise<VectorMode> {
    if (this.detected) return this.detected;
    const { rows } = await sql<{ type: string }>`select format_type(atttypid, atttypmod) as type from pg_attribute where attrelid = 'memory_chunks'::regclass and attname = 'embedding'`.execute(this.db);
    this.detected = rows[0]?.type === 'vector' ? 'indexed' : 'exact';
    return this.detected;
  }

  /** The pgvector version where search is indexed, for the boot log. */
  async extensionVersion(): Promise<string | null> {
    const { rows } = await sql<{ v: string }>`select extversion as v from pg_extension where extname = 'vector'`.execute(this.db);
    return rows[0]?.v ?? null;
  }

  private literal(mode: VectorMode, v: readonly number[]): string {
    return mode === 'indexed' ? `[${v.join(',')}]` : `{${v.join(',')}}`;
  }

  /** Makes sure the HNSW index of a dimension exists (indexed mode, dimensions HNSW takes); once per process and dimension. */
  async ensureIndex(dims: number): Promise<void> {
    if ((await this.mode()) !== 'indexed' || dims > MAX_INDEXED_DIMS || this.indexed.has(dims)) return;
    const d = dimsSql(dims);
    await this.db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtext('memory:hnsw'))`.execute(trx); // processes racing on one name
      await sql`create index if not exists ${sql.raw(`memory_chunks_hnsw_${dims}`)} on memory_chunks using hnsw ((embedding::vector(${d})) vector_cosine_ops) with (m = ${sql.raw(String(HNSW.m))}, ef_construction = ${sql.raw(String(HNSW.efConstruction))}) where dims = ${d}`.execute(trx);
    });
    this.indexed.add(dims);
  }

  /** Inserts chunks (on `db`: the caller's transaction). */
  async insert(db: Kysely<DB>, rows: readonly ChunkRow[]): Promise<void> {
    if (rows.length === 0) return;
    const mode = await this.mode();
    const cast = mode === 'indexed' ? sql.raw('vector') : sql.raw('real[]');
    await db
      .insertInto('memory_chunks')
      .values(rows.map((r) => ({ collection_id: r.collection_id, document_id: r.document_id, chunk_index: r.chunk_index, dims: r.vector.length, text_sealed: r.text_sealed, embedding: sql<string>`${this.literal(mode, r.vector)}::${cast}` })))
      .execute();
  }

  /**
   * The k chunks of a collection nearest to a unit-length query, nearest first (ties by document and chunk).
   * `exact` scans every chunk of the collection even where an index exists (the benchmark's baseline).
   */
  async search(collectionId: string, query: readonly number[], k: number, opts: { exact?: boolean; efSearch?: number } = {}): Promise<NearRow[]> {
    const mode = await this.mode();
    const d = dimsSql(query.length);
    const q = this.literal(mode, query);
    if (mode === 'exact') {
      const { rows } = await sql<NearRow>`
        select document_id, chunk_index, text_sealed, 1 - memory_dot(embedding, ${q}::real[]) as distance
        from memory_chunks where collection_id = ${collectionId} and dims = ${d}
        order by distance, document_id, chunk_index limit ${k}`.execute(this.db);
      return rows;
    }
    if (opts.exact || query.length > MAX_INDEXED_DIMS) {
      // offset 0 keeps the subquery whole, so the ordering cannot be taken from the index.
      const { rows } = await sql<NearRow>`
        select * from (
          select document_id, chunk_index, text_sealed, embedding::vector(${d}) <=> ${q}::vector(${d}) as distance
          from memory_chunks where collection_id = ${collectionId} and dims = ${d} offset 0
        ) s order by distance, document_id, chunk_index limit ${k}`.execute(this.db);
      return rows;
    }
    // One connection for the settings and the query (session settings: only memory searches read them, and
    // each sets them first), without the two round trips of a transaction.
    return this.db.connection().execute(async (conn) => {
      await sql`select set_config('hnsw.ef_search', ${String(Math.max(opts.efSearch ?? HNSW.efSearch, k))}, false), set_config('hnsw.iterative_scan', 'strict_order', false)`.execute(conn);
      const { rows } = await sql<NearRow>`
        select * from (
          select document_id, chunk_index, text_sealed, embedding::vector(${d}) <=> ${q}::vector(${d}) as distance
          from memory_chunks where collection_id = ${collectionId} and dims = ${d}
          order by embedding::vector(${d}) <=> ${q}::vector(${d}) limit ${k}
        ) s order by distance, document_id, chunk_index`.execute(conn);
      return rows;
    });
  }
}
