import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/** Sandbox runs (metadata only: never stdout/stderr), sessions, snapshots, and idempotency keys. */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table sandbox_sessions (
      id text primary key,
      account_id text not null references accounts(id),
      key_id text,
      node_id text references nodes(id),
      status text not null,
      network boolean not null,
      idle_timeout_seconds integer not null,
      snapshot_id text,
      image_digest text,
      exec_count integer not null default 0,
      cost_micro_usd bigint not null default 0,
      created_at timestamptz not null,
      last_active_at timestamptz not null,
      stopped_at timestamptz
    );
    create index sandbox_sessions_account on sandbox_sessions (account_id, created_at desc);
    create table sandbox_runs (
      id text primary key,
      account_id text not null references accounts(id),
      key_id text,
      session_id text,
      node_id text,
      language text not null,
      network boolean not null,
      status text not null,
      exit_code integer,
      timed_out boolean not null default false,
      oom_killed boolean not null default false,
      duration_ms integer,
      stdout_bytes integer,
      stderr_bytes integer,
      cost_micro_usd bigint not null default 0,
      image_digest text,
      receipt_id text,
      created_at timestamptz not null
    );
    create index sandbox_runs_account on sandbox_runs (account_id, created_at desc);
    create table sandbox_snapshots (
      id text primary key,
      account_id text not null references accounts(id),
      session_id text not null,
      node_id text not null,
      bytes bigint not null,
      sha256 text not null,
      created_at timestamptz not null,
      deleted_at timestamptz
    );
    create index sandbox_snapshots_account on sandbox_snapshots (account_id, created_at desc);
    create table idempotency_keys (
      account_id text not null references accounts(id),
      route text not null,
      key text not null,
      body_sha256 text not null,
      state text not null,
      status_code integer,
      response jsonb,
      headers jsonb,
      created_at timestamptz not null,
      primary key (account_id, route, key)
    );
  `);
}
