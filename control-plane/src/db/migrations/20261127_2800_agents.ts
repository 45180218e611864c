import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Hosted agents (agents module): agents with sealed code and key secret, their runs (metadata only; a queued
 * run's input sealed until claimed), mailboxes (sealed messages) and the hook signatures seen in the replay
 * window. Runs, messages and signatures go with their agent.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table agents (
      id text primary key,
      account_id text not null references accounts(id),
      name text not null,
      language text not null,
      code_sealed bytea not null,
      code_sha256 text not null,
      code_bytes integer not null,
      key_id text not null unique references api_keys(id),
      key_sealed bytea not null,
      timeout_seconds integer not null,
      network boolean not null,
      schedule text,
      next_run_at timestamptz,
      enabled boolean not null,
      mailbox_trigger boolean not null,
      max_runs_per_hour integer not null,
      hook_token_hash text unique,
      hook_created_at timestamptz,
      hook_secret_sealed bytea,
      run_count integer not null default 0,
      last_run_id text,
      last_run_at timestamptz,
      last_run_status text,
      created_at timestamptz not null,
      updated_at timestamptz not null
    );
    create index agents_account on agents (account_id, created_at);
    create index agents_due on agents (next_run_at) where next_run_at is not null;
    create table agent_runs (
      id text primary key,
      seq bigserial unique,
      agent_id text not null references agents(id) on delete cascade,
      account_id text not null references accounts(id),
      trigger text not null check (trigger in ('manual', 'schedule', 'mailbox', 'hook')),
      status text not null check (status in ('queued', 'running', 'succeeded', 'failed', 'refused')),
      input_sealed bytea,
      input_bytes integer not null,
      request_id text not null,
      cost_micro_usd bigint,
      exit_code integer,
      duration_ms integer,
      error_type text,
      error_message text,
      receipt_id text,
      receipt_hash text,
      receipt_signature text,
      receipt_canonical text,
      claimed_by text,
      claim_until timestamptz,
      created_at timestamptz not null,
      started_at timestamptz,
      ended_at timestamptz
    );
    create index agent_runs_agent on agent_runs (agent_id, seq desc);
    create index agent_runs_window on agent_runs (agent_id, created_at);
    create index agent_runs_queued on agent_runs (seq) where status = 'queued';
    create index agent_runs_running on agent_runs (claim_until) where status = 'running';
    create table agent_messages (
      id text primary key,
      seq bigserial unique,
      agent_id text not null references agents(id) on delete cascade,
      account_id text not null references accounts(id),
      from_agent_id text,
      content_sealed bytea not null,
      bytes integer not null,
      run_id text,
      created_at timestamptz not null,
      read_at timestamptz
    );
    create index agent_messages_mailbox on agent_messages (agent_id, seq);
    create table agent_hook_signatures (
      agent_id text not null references agents(id) on delete cascade,
      signature text not null,
      seen_at timestamptz not null,
      primary key (agent_id, signature)
    );
    create index agent_hook_signatures_seen on agent_hook_signatures (seen_at);
  `);
}
