import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Mandates and ghost sessions. API keys gain allow lists (models, route patterns; null: any), which the auth
 * layer checks on every request of the key and of keys below it, and `managed_by` ('mandate', 'ghost'):
 * such a key is revoked, extended and expired through what manages it and is never rotated. Mandates keep
 * their signed document; ghost sessions keep metadata only until destroyed or expired.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table api_keys add column allowed_models jsonb;
    alter table api_keys add column allowed_routes jsonb;
    alter table api_keys add column managed_by text;
    create table mandates (
      id text primary key,
      account_id text not null references accounts(id),
      parent_key_id text not null references api_keys(id),
      key_id text not null unique references api_keys(id),
      canonical text not null,
      signature text not null,
      signer text not null,
      owner_address text,
      owner_signature text,
      spend_cap_micro_usd bigint not null,
      expires_at timestamptz not null,
      created_at timestamptz not null,
      revoked_at timestamptz
    );
    create index mandates_account on mandates (account_id, created_at);
    create table ghost_sessions (
      id text primary key,
      account_id text not null references accounts(id),
      key_id text not null unique references api_keys(id),
      name text,
      scopes jsonb not null,
      spend_cap_micro_usd bigint,
      created_at timestamptz not null,
      expires_at timestamptz not null
    );
    create index ghost_sessions_account on ghost_sessions (account_id, created_at);
    create index ghost_sessions_expiry on ghost_sessions (expires_at);
  `);
}
