import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Webhooks (webhooks module): endpoints with a sealed signing secret, and a durable outbox. An emitted
 * event is one `webhook_events` row fanned out to one `webhook_deliveries` row per matching enabled
 * webhook (unique per event and webhook); the leader's loop claims due deliveries (a lease, so a sender
 * that dies mid-attempt leaks nothing) and records every attempt in `webhook_attempts`.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table webhooks (
      id text primary key,
      account_id text not null references accounts(id),
      url text not null,
      events jsonb,
      description text,
      secret_sealed text not null,
      enabled boolean not null default true,
      created_at timestamptz not null,
      disabled_at timestamptz
    );
    create index webhooks_account on webhooks (account_id, created_at);
    create table webhook_events (
      id text primary key,
      account_id text not null references accounts(id),
      type text not null,
      data jsonb not null,
      created_at timestamptz not null
    );
    create index webhook_events_time on webhook_events (created_at);
    create table webhook_deliveries (
      id text primary key,
      event_id text not null references webhook_events(id) on delete cascade,
      webhook_id text not null references webhooks(id),
      status text not null check (status in ('pending', 'delivered', 'failed', 'canceled')),
      attempts integer not null default 0,
      next_attempt_at timestamptz,
      claim_token text,
      claimed_until timestamptz,
      last_status_code integer,
      last_error text,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (event_id, webhook_id)
    );
    create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status = 'pending';
    create index webhook_deliveries_webhook on webhook_deliveries (webhook_id) where status = 'pending';
    create table webhook_attempts (
      id bigserial primary key,
      delivery_id text not null references webhook_deliveries(id) on delete cascade,
      webhook_id text not null references webhooks(id),
      event_id text not null,
      event_type text not null,
      attempt integer not null,
      status_code integer,
      error text,
      duration_ms integer not null,
      outcome text not null check (outcome in ('delivered', 'retrying', 'failed')),
      at timestamptz not null
    );
    create index webhook_attempts_webhook on webhook_attempts (webhook_id, id);
    create index webhook_attempts_time on webhook_attempts (at);
  `);
}
