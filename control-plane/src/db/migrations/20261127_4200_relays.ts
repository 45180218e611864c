import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Relays (relays module): sealed temporary shares of objects behind a link secret (stored as sha256), with
 * an expiry, an access cap, an optional PIN (scrypt with a salt of its own) and a view-only flag. Revoking,
 * expiring or locking nulls every object's ciphertext; the content-free rows stay. A grant is what opening
 * the link returns: a short-lived token (sha256) for fetching the objects of that one access.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table relays (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      secret_hash text not null unique,
      pin_hash text,
      pin_salt text,
      view_only boolean not null,
      max_accesses integer not null check (max_accesses > 0),
      accesses integer not null check (accesses >= 0),
      failed_pins integer not null,
      state text not null check (state in ('active', 'revoked', 'locked')),
      object_count integer not null,
      total_bytes bigint not null,
      expires_at timestamptz not null,
      created_at timestamptz not null,
      ended_at timestamptz,
      content_destroyed_at timestamptz,
      check ((pin_hash is null) = (pin_salt is null)),
      check ((state = 'active') = (ended_at is null))
    );
    create index relays_account on relays (account_id, seq desc);
    create index relays_live on relays (expires_at) where content_destroyed_at is null;
    create table relay_objects (
      id text primary key,
      relay_id text not null references relays(id),
      position integer not null,
      name text not null,
      content_type text not null,
      bytes integer not null,
      sha256 text not null,
      content_sealed bytea,
      unique (relay_id, position)
    );
    create table relay_grants (
      token_hash text primary key,
      relay_id text not null references relays(id),
      expires_at timestamptz not null
    );
    create index relay_grants_relay on relay_grants (relay_id);
  `);
}
