import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB, RelayObjectsTable, RelaysTable } from '../../db/schema.ts';

export type RelayRow = Selectable<RelaysTable>;
export type ObjectMeta = Omit<Selectable<RelayObjectsTable>, 'content_sealed'>;

/** Spec document 3, Limits: GET /v1/relays lists the 100 most recent. */
export const LIST_CAP = 100;

const META = ['id', 'relay_id', 'position', 'name', 'content_type', 'bytes', 'sha256'] as const;

export async function insertRelay(db: Kysely<DB>, relay: Insertable<RelaysTable>, objects: Insertable<RelayObjectsTable>[]): Promise<void> {
  await db.insertInto('relays').values(relay).execute();
  for (const o of objects) await db.insertInto('relay_objects').values(o).execute();
}

export async function relayBySecret(db: Kysely<DB>, secretHash: string, lock = false): Promise<RelayRow | undefined> {
  let q = db.selectFrom('relays').selectAll().where('secret_hash', '=', secretHash);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function ownedRelay(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<RelayRow | undefined> {
  let q = db.selectFrom('relays').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function recentRelays(db: Kysely<DB>, accountId: string): Promise<RelayRow[]> {
  return db.selectFrom('relays').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(LIST_CAP).execute();
}

export async function objectsOf(db: Kysely<DB>, relayIds: string[]): Promise<ObjectMeta[]> {
  if (relayIds.length === 0) return [];
  return db.selectFrom('relay_objects').select(META).where('relay_id', 'in', relayIds).orderBy('relay_id').orderBy('position').execute();
}

export async function objectContent(db: Kysely<DB>, relayId: string, objectId: string): Promise<(ObjectMeta & { content_sealed: Uint8Array | null }) | undefined> {
  return db.selectFrom('relay_objects').selectAll().where('relay_id', '=', relayId).where('id', '=', objectId).executeTakeFirst();
}

export async function updateRelay(db: Kysely<DB>, id: string, set: Partial<RelayRow>): Promise<void> {
  await db.updateTable('relays').set(set).where('id', '=', id).execute();
}

/** Nulls every object's ciphertext and the relay's grants, and marks when (in the caller's transaction). */
export async function destroyContent(db: Kysely<DB>, id: string, at: Date): Promise<void> {
  await db.updateTable('relay_objects').set({ content_sealed: null }).where('relay_id', '=', id).execute();
  await db.deleteFrom('relay_grants').where('relay_id', '=', id).execute();
  await db.updateTable('relays').set({ content_destroyed_at: at }).where('id', '=', id).where('content_destroyed_at', 'is', null).execute();
}

/** Relays past their expiry whose ciphertext is still there (the leader's sweep). */
export async function expiredWithContent(db: Kysely<DB>, now: Date, limit: number): Promise<string[]> {
  const rows = await db.selectFrom('relays').select('id').where('content_destroyed_at', 'is', null).where('expires_at', '<=', now).limit(limit).execute();
  return rows.map((r) => r.id);
}

export async function insertGrant(db: Kysely<DB>, tokenHash: string, relayId: string, expiresAt: Date): Promise<void> {
  await db.insertInto('relay_grants').values({ token_hash: tokenHash, relay_id: relayId, expires_at: expiresAt }).execute();
}

export async function grantOf(db: Kysely<DB>, tokenHash: string): Promise<{ relay_id: string; expires_at: Date } | undefined> {
  return db.selectFrom('relay_grants').select(['relay_id', 'expires_at']).where('token_hash', '=', tokenHash).executeTakeFirst();
}

export async function dropExpiredGrants(db: Kysely<DB>, now: Date): Promise<void> {
  await db.deleteFrom('relay_grants').where('expires_at', '<=', now).execute();
}
