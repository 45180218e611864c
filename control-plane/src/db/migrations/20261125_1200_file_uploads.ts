import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Uploads in progress (files module): an upload's chunks are written as its body arrives, outside any
 * transaction, before its `files` row exists. This row says whose they are until the upload ends (the row
 * is deleted with the `files` row's insert, or with the chunks when the upload fails); the rows of a process
 * that left the database (killed mid-upload) are swept with their chunks.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `create table file_uploads (file_id text primary key, process_id text not null, started_at timestamptz not null);`);
}
