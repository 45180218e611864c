import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * `idempotency_keys.process_id`: the process running an in-progress key's request (`Database.processId`),
 * so a retry can tell a request still running from one whose process died. `owner_missed_at`: when a retry
 * first found that process gone from the database; a second miss a few seconds later takes the key over.
 * Rows written before this have no owner and keep the old rule (running until they expire).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table idempotency_keys add column process_id text;
    alter table idempotency_keys add column owner_missed_at timestamptz;
  `);
}
