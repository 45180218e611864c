import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/** Enrolled nodes and the jobs dispatched to them. */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table nodes (
      id text primary key,
      account_id text not null references accounts(id),
      name text,
      house boolean not null default false,
      kinds jsonb not null,
      models jsonb not null default '[]'::jsonb,
      model_map jsonb not null default '{}'::jsonb,
      declared_speed_factor double precision not null default 1,
      speed_factor double precision not null default 1,
      clamp_count integer not null default 0,
      key_hash text not null unique,
      key_prefix text not null,
      approved boolean not null default false,
      disabled boolean not null default false,
      draining boolean not null default false,
      endpoint text,
      capabilities jsonb,
      running_jobs integer not null default 0,
      agent_version text,
      last_heartbeat_at timestamptz,
      dispatched integer not null default 0,
      succeeded integer not null default 0,
      failed integer not null default 0,
      latency_ms double precision,
      observed_speed double precision,
      created_at timestamptz not null,
      revoked_at timestamptz
    );
    create index nodes_account on nodes (account_id);
    create table jobs (
      id text primary key,
      node_id text references nodes(id),
      account_id text references accounts(id),
      kind text not null,
      status text not null,
      attempts integer not null default 0,
      error text,
      created_at timestamptz not null,
      dispatched_at timestamptz,
      ended_at timestamptz
    );
    create index jobs_node_open on jobs (node_id) where status in ('dispatched', 'running');
  `);
}
