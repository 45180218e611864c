import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Legacy plans (legacy module): plans, their objects (sealed files, content-free once replaced or cancelled),
 * parties (beneficiaries with hashed claim tokens, attesters with their confirmation) and the chained events.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table legacy_plans (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      name text not null,
      status text not null check (status in ('active', 'warning', 'released', 'cancelled')),
      checkin_interval_seconds integer not null check (checkin_interval_seconds > 0),
      grace_seconds integer not null check (grace_seconds >= 0),
      quorum integer check (quorum > 0),
      deadline_at timestamptz not null,
      warned_at timestamptz,
      released_at timestamptz,
      cancelled_at timestamptz,
      last_checkin_at timestamptz,
      note_sealed bytea,
      note_bytes integer not null,
      content_version integer not null,
      event_count integer not null,
      head_hash text not null,
      created_at timestamptz not null,
      check ((status = 'cancelled') <= (note_sealed is null)),
      check ((status = 'released') <= (released_at is not null))
    );
    create index legacy_plans_account on legacy_plans (account_id, seq desc);
    create index legacy_plans_due on legacy_plans (deadline_at) where status in ('active', 'warning');
    create table legacy_objects (
      id text primary key,
      plan_id text not null references legacy_plans(id),
      version integer not null,
      position integer not null,
      name text not null,
      content_type text not null,
      byte_len integer not null,
      sha256 text not null,
      content_sealed bytea,
      created_at timestamptz not null,
      replaced_at timestamptz
    );
    create index legacy_objects_plan on legacy_objects (plan_id, version, position);
    create table legacy_parties (
      plan_id text not null references legacy_plans(id),
      role text not null check (role in ('beneficiary', 'attester')),
      wallet text not null,
      label text,
      position integer not null,
      claim_token_hash text unique,
      confirmed_at timestamptz,
      claimed_at timestamptz,
      primary key (plan_id, role, wallet)
    );
    create index legacy_parties_wallet on legacy_parties (wallet, role);
    create table legacy_events (
      plan_id text not null references legacy_plans(id),
      seq integer not null,
      type text not null,
      at timestamptz not null,
      canonical text not null,
      prev_hash text not null,
      hash text not null,
      primary key (plan_id, seq)
    );
  `);
}
