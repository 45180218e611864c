import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * The keys every replica on this database shares, by fingerprint only (key-record.ts): the receipt signer's
 * address and a fingerprint of the seal key, recorded by the first process that boots, with the signers it
 * replaced. One row; a process whose keys differ refuses to boot.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table gateway_keys (
      id boolean primary key default true check (id),
      signer_address text not null,
      seal_fingerprint text not null,
      previous_signers jsonb not null default '[]'::jsonb,
      recorded_at timestamptz not null,
      updated_at timestamptz not null
    );
  `);
}
