import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Organizations (orgs module): an org bills to its creator's account; members hold a role; invites are
 * stored as a sha256 of their token. A switched session (identity's sessions table) acts for the
 * billing account and names the org and the member it acts for.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table orgs (
      id text primary key,
      name text not null,
      billing_account_id text not null references accounts(id),
      created_by text not null references accounts(id),
      created_at timestamptz not null,
      updated_at timestamptz not null
    );
    create index orgs_billing on orgs (billing_account_id);
    create table org_members (
      org_id text not null references orgs(id) on delete cascade,
      account_id text not null references accounts(id),
      role text not null check (role in ('owner', 'admin', 'member')),
      invited_by text,
      joined_at timestamptz not null,
      primary key (org_id, account_id)
    );
    create index org_members_account on org_members (account_id);
    create table org_invites (
      id text primary key,
      org_id text not null references orgs(id) on delete cascade,
      token_hash text not null unique,
      role text not null check (role in ('owner', 'admin', 'member')),
      account_id text references accounts(id),
      created_by text not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      accepted_at timestamptz,
      accepted_by text,
      revoked_at timestamptz
    );
    create index org_invites_org on org_invites (org_id, created_at);
    alter table sessions add column org_id text;
    alter table sessions add column acting_account_id text;
    create index sessions_org on sessions (org_id, acting_account_id) where org_id is not null;
  `);
}
