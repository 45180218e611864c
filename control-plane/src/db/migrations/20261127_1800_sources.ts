import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Source sets (sources module): a set row with its ordered root, and its members in root order. Taking a
 * set down stamps deleted_at and deletes the members; the row stays, content-free. Reads by id are primary
 * key lookups (the inference routes read one per call that cites a set); an account's list walks its own
 * partial index, newest first.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table source_sets (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      root text not null,
      member_count integer not null check (member_count > 0),
      created_at timestamptz not null,
      deleted_at timestamptz
    );
    create index source_sets_account on source_sets (account_id, seq desc) where deleted_at is null;
    create table source_set_members (
      set_id text not null references source_sets(id) on delete cascade,
      position integer not null check (position >= 0),
      label text not null,
      sha256 text not null,
      byte_len bigint not null check (byte_len >= 0),
      primary key (set_id, position),
      unique (set_id, label)
    );
  `);
}
