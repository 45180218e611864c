import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Attestations of on-chain facts (attestations module): one row per signed version, never updated; the
 * bytes of every source answer a version read, kept as its evidence.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table attestation_records (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      key_id text,
      asset_id text not null,
      version integer not null check (version >= 1),
      subject_ref text not null,
      status_at_check text not null check (status_at_check in ('VERIFIED', 'DISCREPANCY', 'UNAVAILABLE')),
      public_inputs boolean not null,
      spec text not null,
      document text not null,
      document_sha256 text not null,
      signature text not null,
      receipt_id text not null,
      checked_at timestamptz not null,
      fresh_until timestamptz not null,
      unique (account_id, asset_id, version)
    );
    create index attestation_records_public on attestation_records (asset_id, seq desc) where public_inputs;
    create table attestation_evidence (
      record_id text not null references attestation_records(id),
      idx integer not null,
      name text not null,
      request text not null,
      body bytea,
      sha256 text,
      read_at timestamptz not null,
      primary key (record_id, idx)
    );
  `);
}
