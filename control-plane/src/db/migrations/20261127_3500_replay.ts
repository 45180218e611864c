import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Replay capsules (replay module): one row per recorded request, its sealed request nulled by deletion (a
 * check keeps a deleted row without it), and one row per replay: fingerprints and receipt ids, no content.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table replay_capsules (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      key_id text not null,
      model text not null,
      request_sealed bytea,
      request_sha256 text not null,
      output_sha256 text not null,
      receipt_id text not null,
      cost_micro_usd bigint not null,
      replay_count integer not null default 0,
      changed_count integer not null default 0,
      last_replayed_at timestamptz,
      created_at timestamptz not null,
      deleted_at timestamptz,
      check ((deleted_at is null) = (request_sealed is not null))
    );
    create index replay_capsules_account on replay_capsules (account_id, seq desc);
    create table replay_runs (
      id text primary key,
      seq bigint generated always as identity,
      capsule_id text not null references replay_capsules(id),
      account_id text not null,
      key_id text not null,
      model text,
      output_sha256 text not null,
      changed boolean not null,
      receipt_id text not null,
      cost_micro_usd bigint not null,
      created_at timestamptz not null
    );
    create index replay_runs_capsule on replay_runs (capsule_id, seq desc);
  `);
}
