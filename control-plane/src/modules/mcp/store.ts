import { sql, type Kysely, type Selectable, type Updateable } from 'kysely';
import type { DB, McpServersTable } from '../../db/schema.ts';

export type ServerRow = Selectable<McpServersTable>;

/** Registrations of the account, oldest first, deregistered ones left out. */
export function listServers(db: Kysely<DB>, accountId: string): Promise<ServerRow[]> {
  return db.selectFrom('mcp_servers').selectAll().where('account_id', '=', accountId).where('deleted_at', 'is', null).orderBy('created_at').orderBy('id').execute();
}

/** One live registration of the account (undefined for another account's, a deregistered or an unknown one). */
export function ownServer(db: Kysely<DB>, accountId: string, id: string): Promise<ServerRow | undefined> {
  return db.selectFrom('mcp_servers').selectAll().where('id', '=', id).where('account_id', '=', accountId).where('deleted_at', 'is', null).executeTakeFirst();
}

export function insertServer(db: Kysely<DB>, row: ServerRow): Promise<ServerRow> {
  return db
    .insertInto('mcp_servers')
    .values({ ...row, allowed_tools: row.allowed_tools ? JSON.stringify(row.allowed_tools) : null })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function updateServer(db: Kysely<DB>, accountId: string, id: string, set: Updateable<McpServersTable>): Promise<ServerRow | undefined> {
  return db.updateTable('mcp_servers').set(set).where('id', '=', id).where('account_id', '=', accountId).where('deleted_at', 'is', null).returningAll().executeTakeFirst();
}

/** Deregisters: URL and credential ciphertexts nulled in the statement that marks the row deleted. */
export function destroyServer(db: Kysely<DB>, accountId: string, id: string, at: Date): Promise<ServerRow | undefined> {
  return updateServer(db, accountId, id, { url_sealed: null, credential_sealed: null, enabled: false, deleted_at: at, updated_at: at });
}

// Sessions of the remote MCP server.

export async function insertSession(db: Kysely<DB>, s: { id: string; account_id: string; key_id: string; protocol_version: string | null; at: Date }): Promise<void> {
  await db.insertInto('mcp_sessions').values({ id: s.id, account_id: s.account_id, key_id: s.key_id, protocol_version: s.protocol_version, created_at: s.at, last_used_at: s.at }).execute();
}

/** Keeps the key's `keep` most recently used sessions that are still live and deletes the rest; how many went. */
export async function trimSessions(db: Kysely<DB>, keyId: string, keep: number, liveSince: Date): Promise<number> {
  const r = await db
    .deleteFrom('mcp_sessions')
    .where('key_id', '=', keyId)
    .where((eb) =>
      eb.or([
        eb('last_used_at', '<=', liveSince),
        eb(
          'id',
          'not in',
          eb.selectFrom('mcp_sessions').select('id').where('key_id', '=', keyId).where('last_used_at', '>', liveSince).orderBy('last_used_at', 'desc').orderBy('id', 'desc').limit(keep),
        ),
      ]),
    )
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}

export function findSession(db: Kysely<DB>, id: string) {
  return db.selectFrom('mcp_sessions').select(['id', 'account_id', 'key_id', 'last_used_at']).where('id', '=', id).executeTakeFirst();
}

export async function touchSession(db: Kysely<DB>, id: string, at: Date): Promise<void> {
  await db.updateTable('mcp_sessions').set({ last_used_at: at }).where('id', '=', id).where('last_used_at', '<', at).execute();
}

export async function deleteSession(db: Kysely<DB>, id: string, keyId: string): Promise<boolean> {
  const r = await db.deleteFrom('mcp_sessions').where('id', '=', id).where('key_id', '=', keyId).executeTakeFirst();
  return Number(r.numDeletedRows) > 0;
}

/** Sessions idle since `before` (leader loop). */
export async function purgeSessions(db: Kysely<DB>, before: Date): Promise<number> {
  const r = await db.deleteFrom('mcp_sessions').where('last_used_at', '<=', before).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/** How many live sessions a key holds (tests, metrics). */
export async function countSessions(db: Kysely<DB>, keyId: string, liveSince: Date): Promise<number> {
  const r = await db.selectFrom('mcp_sessions').select(sql<number>`count(*)`.as('n')).where('key_id', '=', keyId).where('last_used_at', '>', liveSince).executeTakeFirstOrThrow();
  return Number(r.n);
}
