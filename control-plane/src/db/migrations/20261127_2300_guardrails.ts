import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Guardrail rule sets and policies (guardrails and policies modules), and the policy an API key carries.
 * One live policy per content and account (a partial unique index); keys name theirs in api_keys.policy_id,
 * read with the key when it authenticates, so a key without one costs nothing more.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table guardrails (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      name text,
      detectors jsonb not null,
      created_at timestamptz not null
    );
    create index guardrails_account on guardrails (account_id, seq desc);
    create table policies (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      sha256 text not null,
      canonical text not null,
      generation integer not null check (generation >= 0),
      created_at timestamptz not null,
      revoked_at timestamptz,
      unique (account_id, sha256, generation)
    );
    create unique index policies_live on policies (account_id, sha256) where revoked_at is null;
    create index policies_account on policies (account_id, seq desc) where revoked_at is null;
    alter table api_keys add column policy_id text references policies(id);
  `);
}
