import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Sealed calls (calls module): one row per commitment. Text and salt are sealed columns that withdrawal
 * nulls (a check keeps a withdrawn row without them); commitment and receipt are never changed.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table sealed_calls (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      key_id text,
      state text not null check (state in ('committed', 'revealed', 'withdrawn')),
      commitment text not null,
      text_sealed bytea,
      salt_sealed bytea,
      receipt_id text not null unique,
      receipt_payload text not null,
      receipt_hash text not null,
      receipt_signature text not null,
      created_at timestamptz not null,
      revealed_at timestamptz,
      withdrawn_at timestamptz,
      check ((state = 'withdrawn') = (text_sealed is null and salt_sealed is null)),
      check ((state = 'revealed') <= (revealed_at is not null))
    );
    create index sealed_calls_account on sealed_calls (account_id, seq desc);
  `);
}
