import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Durable state (state module): values keyed by (account, namespace, key), sealed at rest, each with a
 * version for compare-and-set; and per account the highest version it deleted, which new keys start above.
 * Namespace and key use collation "C": byte-wise comparison, the order the listing returns.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table state_values (
      account_id text not null references accounts(id),
      namespace text collate "C" not null,
      key text collate "C" not null,
      version bigint not null check (version > 0),
      value_sealed bytea not null,
      size integer not null check (size >= 0),
      created_at timestamptz not null,
      updated_at timestamptz not null,
      primary key (account_id, namespace, key)
    );
    create table state_version_floors (
      account_id text primary key references accounts(id),
      version bigint not null
    );
  `);
}
