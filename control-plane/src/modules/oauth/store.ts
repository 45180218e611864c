import type { Kysely, Selectable } from 'kysely';
import type { DB, OAuthClientsTable, OAuthConsentsTable } from '../../db/schema.ts';
import { OAUTH_TTL, tokenHash } from './tokens.ts';

export type ClientRow = Selectable<OAuthClientsTable>;
export type ConsentRow = Selectable<OAuthConsentsTable>;

export async function clientRow(db: Kysely<DB>, id: string): Promise<ClientRow | undefined> {
  return db.selectFrom('oauth_clients').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Revokes a token family: its refresh tokens stop working with the family, its access tokens at once. */
export async function revokeFamily(db: Kysely<DB>, familyId: string, reason: string, now: Date): Promise<void> {
  await db.updateTable('oauth_families').set({ revoked_at: now, revoked_reason: reason }).where('id', '=', familyId).where('revoked_at', 'is', null).execute();
  await db.updateTable('oauth_access_tokens').set({ revoked_at: now }).where('family_id', '=', familyId).where('revoked_at', 'is', null).execute();
}

/** Stores a refresh token and an access token of a family (hashes only); returns their expiries. */
export async function storeTokens(db: Kysely<DB>, familyId: string, t: { access: string; refresh: string | null; scopes: string[] }, now: Date) {
  const accessExpires = new Date(now.getTime() + OAUTH_TTL.accessMs);
  await db
    .insertInto('oauth_access_tokens')
    .values({ token_hash: tokenHash(t.access), family_id: familyId, scopes: JSON.stringify(t.scopes), created_at: now, expires_at: accessExpires, revoked_at: null })
    .execute();
  if (t.refresh) {
    await db
      .insertInto('oauth_refresh_tokens')
      .values({ token_hash: tokenHash(t.refresh), family_id: familyId, created_at: now, expires_at: new Date(now.getTime() + OAUTH_TTL.refreshMs), rotated_at: null, successor_hash: null })
      .execute();
  }
  return { accessExpires };
}

/** The live consent of an account to a client, if any; locked for the rest of the transaction with `lock`. */
export async function liveConsent(db: Kysely<DB>, accountId: string, clientId: string, lock = false): Promise<ConsentRow | undefined> {
  let q = db.selectFrom('oauth_consents').selectAll().where('account_id', '=', accountId).where('client_id', '=', clientId).where('revoked_at', 'is', null);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

export function consentView(c: ConsentRow) {
  return {
    id: c.id,
    object: 'oauth_consent' as const,
    client_id: c.client_id,
    client_name: c.client_name,
    scopes: c.scopes,
    key_id: c.key_id,
    created_at: c.created_at.toISOString(),
    updated_at: c.updated_at.toISOString(),
    last_used_at: c.last_used_at?.toISOString() ?? null,
  };
}

/** Rows past their use: answered or expired requests, codes and tokens a day past expiry. */
export async function purgeExpired(db: Kysely<DB>, now: Date): Promise<number> {
  const before = new Date(now.getTime() - 24 * 3600_000);
  let n = 0;
  const count = (r: { numDeletedRows: bigint }) => (n += Number(r.numDeletedRows));
  count(await db.deleteFrom('oauth_requests').where('expires_at', '<', before).executeTakeFirst());
  count(await db.deleteFrom('oauth_codes').where('expires_at', '<', before).executeTakeFirst());
  count(await db.deleteFrom('oauth_access_tokens').where('expires_at', '<', before).executeTakeFirst());
  count(await db.deleteFrom('oauth_refresh_tokens').where('expires_at', '<', before).executeTakeFirst());
  return n;
}
