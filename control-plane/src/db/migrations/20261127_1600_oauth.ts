import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * The OAuth authorization server for connectors (oauth module): dynamically registered public clients,
 * pending authorization requests, consents (each acting through an API key of the account), authorization
 * codes, refresh-token families, refresh and access tokens. Secrets are kept as sha256 only.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table oauth_clients (
      id text primary key,
      client_name text,
      client_uri text,
      redirect_uris jsonb not null,
      grant_types jsonb not null,
      scope text,
      created_at timestamptz not null
    );
    create table oauth_requests (
      id text primary key,
      client_id text not null,
      client_name text not null,
      redirect_uri text not null,
      scopes jsonb not null,
      state text,
      code_challenge text not null,
      resource text,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      answered_at timestamptz
    );
    create index oauth_requests_expiry on oauth_requests (expires_at);
    create table oauth_consents (
      id text primary key,
      account_id text not null references accounts(id),
      client_id text not null,
      client_name text not null,
      scopes jsonb not null,
      key_id text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      last_used_at timestamptz,
      revoked_at timestamptz
    );
    create unique index oauth_consents_live on oauth_consents (account_id, client_id) where revoked_at is null;
    create table oauth_families (
      id text primary key,
      consent_id text not null references oauth_consents(id),
      client_id text not null,
      scopes jsonb not null,
      resource text,
      created_at timestamptz not null,
      revoked_at timestamptz,
      revoked_reason text
    );
    create index oauth_families_consent on oauth_families (consent_id);
    create table oauth_codes (
      code_hash text primary key,
      consent_id text not null references oauth_consents(id),
      client_id text not null,
      redirect_uri text not null,
      code_challenge text not null,
      scopes jsonb not null,
      resource text,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      used_at timestamptz,
      family_id text references oauth_families(id)
    );
    create index oauth_codes_expiry on oauth_codes (expires_at);
    create table oauth_refresh_tokens (
      token_hash text primary key,
      family_id text not null references oauth_families(id),
      created_at timestamptz not null,
      expires_at timestamptz not null,
      rotated_at timestamptz,
      successor_hash text
    );
    create index oauth_refresh_tokens_family on oauth_refresh_tokens (family_id);
    create index oauth_refresh_tokens_expiry on oauth_refresh_tokens (expires_at);
    create table oauth_access_tokens (
      token_hash text primary key,
      family_id text not null references oauth_families(id),
      scopes jsonb not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      revoked_at timestamptz
    );
    create index oauth_access_tokens_family on oauth_access_tokens (family_id);
    create index oauth_access_tokens_expiry on oauth_access_tokens (expires_at);
  `);
}
