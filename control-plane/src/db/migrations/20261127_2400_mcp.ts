import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * MCP: third-party MCP server registrations (URL and credential sealed; deregistering nulls both and keeps
 * the row) and the sessions of the remote MCP server, bound to the API key that opened them.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table mcp_servers (
      id text primary key,
      account_id text not null references accounts(id),
      name text not null,
      url_sealed text,
      credential_sealed text,
      credential_header text,
      allowed_tools jsonb,
      price_micro_usd_per_call bigint,
      enabled boolean not null default true,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      deleted_at timestamptz
    );
    create index mcp_servers_account on mcp_servers (account_id, created_at);
    create table mcp_sessions (
      id text primary key,
      account_id text not null references accounts(id),
      key_id text not null,
      protocol_version text,
      created_at timestamptz not null,
      last_used_at timestamptz not null
    );
    create index mcp_sessions_key on mcp_sessions (key_id, last_used_at);
    create index mcp_sessions_idle on mcp_sessions (last_used_at);
  `);
}
