import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Private NAV (nav module): an asset id held by the account that first calculated it, and one row per signed
 * version with its sealed book; publishing sets published_at once and changes nothing else.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table nav_assets (
      asset_id text primary key,
      account_id text not null references accounts(id),
      created_at timestamptz not null
    );
    create table nav_records (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references nav_assets(asset_id),
      account_id text not null references accounts(id),
      key_id text,
      version integer not null check (version >= 1),
      status_at_calculation text not null check (status_at_calculation in ('VERIFIED', 'STALE', 'UNAVAILABLE')),
      document text not null,
      document_sha256 text not null,
      signature text not null,
      book_sealed bytea not null,
      receipt_id text not null,
      computed_at timestamptz not null,
      fresh_until timestamptz not null,
      published_at timestamptz,
      unique (asset_id, version)
    );
    create index nav_records_published on nav_records (asset_id, version desc) where published_at is not null;
  `);
}
