import type { Insertable, Kysely, Selectable } from 'kysely';
import { notFound, sha256Hex } from '@svc/shared';
import type { DB, PasskeyChallengesTable, PasskeysTable } from '../../db/schema.ts';

export type PasskeyRow = Selectable<PasskeysTable>;
export type NewPasskey = Omit<Insertable<PasskeysTable>, 'transports'> & { transports: string[] };

/** The same answer for a passkey that does not exist, was removed, or is another account's. */
export const passkeyNotFound = () => notFound('Passkey');

/** What the API shows of a passkey: metadata only, never the public key. */
export function passkeyView(p: PasskeyRow) {
  return {
    id: p.id,
    object: 'passkey' as const,
    name: p.name,
    credential_id: p.credential_id,
    transports: p.transports,
    device_type: p.device_type === 'multiDevice' ? ('multi_device' as const) : ('single_device' as const),
    backed_up: p.backed_up,
    aaguid: p.aaguid,
    created_at: p.created_at.toISOString(),
    last_used_at: p.last_used_at?.toISOString() ?? null,
  };
}

export async function insertPasskey(db: Kysely<DB>, p: NewPasskey): Promise<PasskeyRow> {
  return db
    .insertInto('passkeys')
    .values({ ...p, transports: JSON.stringify(p.transports) })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function passkeysOf(db: Kysely<DB>, accountId: string): Promise<PasskeyRow[]> {
  return db.selectFrom('passkeys').selectAll().where('account_id', '=', accountId).orderBy('created_at').orderBy('id').execute();
}

export async function passkeyCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('passkeys').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function passkeyByCredential(db: Kysely<DB>, credentialId: string, lock = false): Promise<PasskeyRow | undefined> {
  let q = db.selectFrom('passkeys').selectAll().where('credential_id', '=', credentialId);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

/** Records a use: the new counter, the backup state the authenticator reports now, and when. */
export async function recordUse(db: Kysely<DB>, id: string, use: { counter: number; backedUp: boolean; at: Date }): Promise<void> {
  await db.updateTable('passkeys').set({ counter: use.counter, backed_up: use.backedUp, last_used_at: use.at }).where('id', '=', id).execute();
}

export async function renamePasskey(db: Kysely<DB>, accountId: string, id: string, name: string): Promise<PasskeyRow> {
  const r = await db.updateTable('passkeys').set({ name }).where('id', '=', id).where('account_id', '=', accountId).returningAll().executeTakeFirst();
  if (!r) throw passkeyNotFound();
  return r;
}

export async function deletePasskey(db: Kysely<DB>, accountId: string, id: string): Promise<void> {
  const r = await db.deleteFrom('passkeys').where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
  if (Number(r.numDeletedRows) !== 1) throw passkeyNotFound();
}

/** Challenges are kept as the sha256 of their base64url text, as the browser echoes it in the client data. */
export const challengeKey = (challenge: string) => sha256Hex(challenge);

export async function insertChallenge(db: Kysely<DB>, c: Omit<Selectable<PasskeyChallengesTable>, 'used_at'>): Promise<void> {
  await db.insertInto('passkey_challenges').values({ ...c, used_at: null }).execute();
}

/**
 * Uses a challenge, in one statement: true once for an issued, unexpired, unused challenge of this ceremony
 * (and, for registration, of this account); never again, whatever the verification that follows finds.
 */
export async function consumeChallenge(db: Kysely<DB>, challenge: string, ceremony: 'register' | 'login', accountId: string | null, now: Date): Promise<boolean> {
  let q = db
    .updateTable('passkey_challenges')
    .set({ used_at: now })
    .where('challenge_hash', '=', challengeKey(challenge))
    .where('ceremony', '=', ceremony)
    .where('used_at', 'is', null)
    .where('expires_at', '>', now);
  q = accountId === null ? q.where('account_id', 'is', null) : q.where('account_id', '=', accountId);
  return Number((await q.executeTakeFirst()).numUpdatedRows) === 1;
}

/** Removes challenges past their expiry (used or not); returns how many. */
export async function purgeChallenges(db: Kysely<DB>, now: Date): Promise<number> {
  const r = await db.deleteFrom('passkey_challenges').where('expires_at', '<=', now).executeTakeFirst();
  return Number(r.numDeletedRows);
}
