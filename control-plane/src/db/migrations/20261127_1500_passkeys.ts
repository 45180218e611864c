import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Passkeys (passkeys module): WebAuthn credentials that sign in to an account, and the challenges issued
 * for their ceremonies (stored as sha256, single use, expiring). Removing an account's passkey leaves its
 * sessions (identity's sessions table) as they are.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table passkeys (
      id text primary key,
      account_id text not null references accounts(id),
      credential_id text not null unique,
      public_key bytea not null,
      counter bigint not null check (counter >= 0),
      transports jsonb not null,
      device_type text not null check (device_type in ('singleDevice', 'multiDevice')),
      backed_up boolean not null,
      aaguid text not null,
      name text not null,
      created_at timestamptz not null,
      last_used_at timestamptz
    );
    create index passkeys_account on passkeys (account_id, created_at);
    create table passkey_challenges (
      challenge_hash text primary key,
      ceremony text not null check (ceremony in ('register', 'login')),
      account_id text references accounts(id),
      created_at timestamptz not null,
      expires_at timestamptz not null,
      used_at timestamptz,
      check ((ceremony = 'register') = (account_id is not null))
    );
    create index passkey_challenges_expiry on passkey_challenges (expires_at);
  `);
}
