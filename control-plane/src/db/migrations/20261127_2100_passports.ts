import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Passports and KYA credentials. A handle's primary key and the unique account make a claim race-safe: of
 * two claims of one handle (or two handles for one account) exactly one row is written. Handles are never
 * deleted. At most one KYA credential per handle is current (the partial unique index).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table passport_handles (
      handle text primary key,
      account_id text not null unique references accounts(id),
      claimed_at timestamptz not null,
      current_version integer not null,
      verified_runs integer not null,
      receipts bigint not null,
      updated_at timestamptz not null
    );
    create index passport_handles_rank on passport_handles (verified_runs desc, receipts desc, handle);
    create table passports (
      handle text not null references passport_handles(handle),
      version integer not null,
      account_id text not null references accounts(id),
      verified_runs integer not null,
      receipts bigint not null,
      commitment text not null,
      inputs text not null,
      document text not null,
      signature text not null,
      signer text not null,
      issued_at timestamptz not null,
      primary key (handle, version)
    );
    create table kya_credentials (
      id text primary key,
      seq bigint generated always as identity,
      handle text not null references passport_handles(handle),
      account_id text not null references accounts(id),
      key_id text not null,
      document text not null,
      signature text not null,
      signer text not null,
      created_at timestamptz not null,
      superseded_at timestamptz,
      superseded_by text,
      revoked_at timestamptz
    );
    create unique index kya_credentials_current on kya_credentials (handle) where superseded_at is null;
    create index kya_credentials_account on kya_credentials (account_id, seq desc);
  `);
}
