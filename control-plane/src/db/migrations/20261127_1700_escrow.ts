import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/** Prepared escrow claims (escrow module): the trail of POST /v1/escrow/claims, listed newest first per account. */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table escrow_claims (
      id text primary key,
      account_id text not null references accounts(id),
      request_id text not null,
      kind text not null,
      job_field text not null,
      job_id text,
      claim_job_id text,
      claimable boolean not null,
      reasons jsonb not null,
      signer text not null,
      recovered_address text,
      payload_hash text not null,
      created_at timestamptz not null
    );
    create index escrow_claims_account on escrow_claims (account_id, created_at desc, id desc);
    create index escrow_claims_request on escrow_claims (account_id, request_id, created_at desc, id desc);
  `);
}
