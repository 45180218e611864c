import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Memory collections and their chunks (memory module). Where the database has pgvector (the embedded
 * database loads it; a server may have it installed), `embedding` is an untyped `vector` and the memory
 * module adds one HNSW index per dimension at run time (a partial expression index, see docs/memory.md).
 * Where `create extension vector` is unavailable or refused, `embedding` is `real[]` and search is an exact
 * scan in SQL through memory_dot. Both forms hold unit-length vectors, so cosine similarity is a dot product.
 */
export async function up(db: Kysely<any>): Promise<void> {
  // A refusal (not installed, no privilege) is caught inside the block, so the migration's transaction goes on.
  await sql
    .raw(
      `do $$ begin
         if exists (select 1 from pg_available_extensions where name = 'vector') then
           create extension if not exists vector;
         end if;
       exception when others then
         raise notice 'pgvector not created: %', sqlerrm;
       end $$`,
    )
    .execute(db);
  const { rows } = await sql<{ ok: boolean }>`select exists (select 1 from pg_extension where extname = 'vector') as ok`.execute(db);
  const vectorType = rows[0]?.ok ? 'vector' : 'real[]';
  await runStatements(db, `
    create table memory_collections (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      name text not null,
      model text not null,
      dimensions integer check (dimensions > 0),
      metadata jsonb not null,
      documents integer not null default 0 check (documents >= 0),
      chunks integer not null default 0 check (chunks >= 0),
      created_at timestamptz not null,
      updated_at timestamptz not null
    );
    create index memory_collections_account on memory_collections (account_id, seq desc);
    create table memory_chunks (
      collection_id text not null references memory_collections(id) on delete cascade,
      document_id text not null,
      chunk_index integer not null check (chunk_index >= 0),
      dims integer not null check (dims > 0),
      text_sealed bytea not null,
      embedding ${vectorType} not null,
      primary key (collection_id, document_id, chunk_index)
    );
  `);
  // The exact scan's similarity of two unit vectors (the fallback's search; also the benchmark's baseline).
  await sql
    .raw(`create function memory_dot(a real[], b real[]) returns double precision language sql immutable strict parallel safe as $$ select sum(x::float8 * y::float8) from unnest(a, b) as t(x, y) $$`)
    .execute(db);
}
