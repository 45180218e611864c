import { sql, type Kysely } from 'kysely';

/**
 * svc_hold(jsonb, ...) decided one item for the old svc_hold_many; since 0008 the batch function decides
 * every item itself (and also refuses frozen or revoked keys), so the one-item copy is dropped rather than
 * left to drift from it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`drop function if exists svc_hold(jsonb, boolean, timestamptz, timestamptz, integer, bigint)`.execute(db);
}
