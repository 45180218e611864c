import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Large sealed content in chunk rows (db/sealed-chunks.ts): batch files (`file_chunks`) and video files
 * (`video_chunks`), each chunk at most 4 MiB. `content_chunks` on the owning row counts them; null once the
 * content is destroyed (or never stored). Rows written before this keep their content in the old column.
 * The chunks are ciphertext, which does not compress: stored without trying (`storage external`). The expiry
 * indexes follow the new test of "content still stored" (the TTL purge and video expiry run every minute).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(
    db,
    `
    create table file_chunks (owner_id text not null, seq integer not null, last boolean not null, content bytea not null, primary key (owner_id, seq));
    alter table file_chunks alter column content set storage external;
    create table video_chunks (owner_id text not null, seq integer not null, last boolean not null, content bytea not null, primary key (owner_id, seq));
    alter table video_chunks alter column content set storage external;
    alter table files add column content_chunks integer;
    alter table video_jobs add column content_chunks integer;
    drop index files_expiry;
    create index files_expiry on files (expires_at) where content_chunks is not null or content is not null;
    drop index video_jobs_expiry;
    create index video_jobs_expiry on video_jobs (expires_at) where status = 'succeeded';
    `,
  );
}
