import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';
import type { Kysely } from 'kysely';
import { Sealer, ServiceError, invalid, newId, notFound, randomId, sha256Hex, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { destroyContent, expiredWithContent, grantOf, insertGrant, insertRelay, objectContent, objectsOf, ownedRelay, recentRelays, relayBySecret, updateRelay, dropExpiredGrants, type ObjectMeta, type RelayRow } from './store.ts';

const scryptAsync = promisify(scrypt) as (pin: string, salt: Buffer, len: number) => Promise<Buffer>;

/** Size limits (documented in docs/marketplace.md): objects per relay, bytes per object, bytes per relay. */
export const MAX_OBJECTS = 10;
export const MAX_OBJECT_BYTES = 8 * 1024 * 1024;
export const MAX_TOTAL_BYTES = 16 * 1024 * 1024;
/** The create route's body limit: the objects travel base64-encoded in JSON. */
export const CREATE_BODY_LIMIT = Math.ceil((MAX_TOTAL_BYTES * 4) / 3) + 1024 * 1024;
export const DEFAULT_EXPIRY_SECONDS = 24 * 3600;
export const MAX_EXPIRY_SECONDS = 7 * 24 * 3600;
export const MIN_EXPIRY_SECONDS = 60;
export const DEFAULT_MAX_ACCESSES = 1;
export const MAX_ACCESSES = 1000;
/** How long the grant an access returns fetches objects for (never past the relay's expiry). */
export const GRANT_SECONDS = 600;
export const PIN = /^\d{4,12}$/;
const VIEWABLE = /^(image|text)\//i;
const CONTENT_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*(\s*;.*)?$/i;

export interface ObjectInput {
  name: string;
  content_type: string;
  content_b64: string;
}

export interface CreateInput {
  objects: ObjectInput[];
  expires_in_seconds?: number | undefined;
  max_accesses?: number | undefined;
  pin?: string | undefined;
  view_only?: boolean | undefined;
}

/** Expired, revoked, used up, locked and unknown links: one answer. */
const gone = () => notFound('Relay link');
const contentAad = (relayId: string, objectId: string) => `relay_objects.content:${relayId}:${objectId}`;

export interface RelaysDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  publicUrl: URL;
  /** Wrong PINs that lock a relay for good (SVC_RELAY_PIN_ATTEMPTS). */
  pinAttempts: number;
}

/**
 * Relays: sealed temporary shares. The owner (a session) creates one from up to MAX_OBJECTS objects with an
 * expiry, an access cap, an optional PIN and a view-only flag, and gets the link once (its secret stored as
 * sha256); lists the latest with metadata only; revokes (ciphertext destroyed at once). Whoever holds the link
 * opens it (`{pin?}`): each open is one access and returns a short-lived grant for fetching the objects.
 * Expired, revoked, used-up, locked and unknown links answer the same 404. Wrong PINs are counted under the
 * relay's row lock; the pinAttempts-th locks it and destroys its ciphertext.
 */
export class RelaysService {
  private readonly sealer: Sealer;

  constructor(private readonly d: RelaysDeps) {
    this.sealer = new Sealer(d.sealKey);
  }

  async create(accountId: string, input: CreateInput) {
    const expires = input.expires_in_seconds ?? DEFAULT_EXPIRY_SECONDS;
    if (!Number.isSafeInteger(expires) || expires < MIN_EXPIRY_SECONDS || expires > MAX_EXPIRY_SECONDS) throw invalid(`expires_in_seconds: ${MIN_EXPIRY_SECONDS} to ${MAX_EXPIRY_SECONDS}`, 'expires_in_seconds');
    const maxAccesses = input.max_accesses ?? DEFAULT_MAX_ACCESSES;
    if (!Number.isSafeInteger(maxAccesses) || maxAccesses < 1 || maxAccesses > MAX_ACCESSES) throw invalid(`max_accesses: 1 to ${MAX_ACCESSES}`, 'max_accesses');
    if (input.pin !== undefined && !PIN.test(input.pin)) throw invalid('pin: 4 to 12 digits', 'pin');
    const viewOnly = input.view_only ?? false;
    if (input.objects.length < 1 || input.objects.length > MAX_OBJECTS) throw invalid(`objects: 1 to ${MAX_OBJECTS} objects`, 'objects');
    const id = newId('rly_');
    let total = 0;
    const objects = input.objects.map((o, i) => {
      const p = `objects[${i}]`;
      if (!o.name || o.name.length > 255 || /[/\\\u0000-\u001f\u007f]/.test(o.name)) throw invalid(`${p}.name: 1-255 characters, no slashes or control characters`, `${p}.name`);
      if (o.content_type.length > 255 || !CONTENT_TYPE.test(o.content_type)) throw invalid(`${p}.content_type: a media type such as text/plain or image/png`, `${p}.content_type`);
      if (viewOnly && !VIEWABLE.test(o.content_type)) throw invalid(`${p}.content_type: a view-only relay serves only image/* and text/*`, `${p}.content_type`);
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(o.content_b64) || o.content_b64.length % 4 !== 0) throw invalid(`${p}.content_b64: base64 of the object's bytes`, `${p}.content_b64`);
      const bytes = Buffer.from(o.content_b64, 'base64');
      if (bytes.length > MAX_OBJECT_BYTES) throw new ServiceError('payload_too_large', `${p}: an object is limited to ${MAX_OBJECT_BYTES} bytes`, { param: `${p}.content_b64` });
      total += bytes.length;
      const oid = newId('robj_');
      return { id: oid, relay_id: id, position: i, name: o.name, content_type: o.content_type, bytes: bytes.length, sha256: sha256Hex(bytes), content_sealed: this.sealer.seal(bytes, contentAad(id, oid)) };
    });
    if (total > MAX_TOTAL_BYTES) throw new ServiceError('payload_too_large', `objects: a relay holds at most ${MAX_TOTAL_BYTES} bytes in all`, { param: 'objects' });
    const secret = `rls_${randomId(43)}`;
    const salt = input.pin === undefined ? null : randomBytes(16);
    const now = this.d.clock.now();
    await this.d.db.transaction().execute(async (trx) => {
      await insertRelay(
        trx,
        {
          id,
          account_id: accountId,
          secret_hash: sha256Hex(secret),
          pin_hash: salt ? (await scryptAsync(input.pin!, salt, 32)).toString('hex') : null,
          pin_salt: salt ? salt.toString('hex') : null,
          view_only: viewOnly,
          max_accesses: maxAccesses,
          accesses: 0,
          failed_pins: 0,
          state: 'active',
          object_count: objects.length,
          total_bytes: total,
          expires_at: new Date(now.getTime() + expires * 1000),
          created_at: now,
          ended_at: null,
          content_destroyed_at: null,
        },
        objects,
      );
    });
    const view = await this.viewOf(accountId, id);
    return { ...view, share_url: new URL(`/v1/relay-access/${secret}`, this.d.publicUrl).toString() };
  }

  private async viewOf(accountId: string, id: string) {
    const r = (await ownedRelay(this.d.db, accountId, id))!;
    return this.view(r, await objectsOf(this.d.db, [r.id]));
  }

  async list(accountId: string) {
    const rows = await recentRelays(this.d.db, accountId);
    const objects = await objectsOf(this.d.db, rows.map((r) => r.id));
    return { relays: rows.map((r) => this.view(r, objects.filter((o) => o.relay_id === r.id))) };
  }

  /** Revokes: the ciphertext is destroyed in the same transaction; idempotent. */
  async revoke(accountId: string, id: string) {
    await this.d.db.transaction().execute(async (trx) => {
      const r = await ownedRelay(trx, accountId, id, true);
      if (!r) throw notFound('Relay');
      const now = this.d.clock.now();
      if (r.state === 'active') await updateRelay(trx, r.id, { state: 'revoked', ended_at: now });
      await destroyContent(trx, r.id, now);
    });
    return this.viewOf(accountId, id);
  }

  status(r: RelayRow): 'active' | 'revoked' | 'locked' | 'expired' | 'exhausted' {
    if (r.state !== 'active') return r.state;
    if (this.d.clock.now() >= r.expires_at) return 'expired';
    if (r.accesses >= r.max_accesses) return 'exhausted';
    return 'active';
  }

  private view(r: RelayRow, objects: ObjectMeta[]) {
    return {
      id: r.id,
      status: this.status(r),
      view_only: r.view_only,
      pin_protected: r.pin_hash !== null,
      expires_at: r.expires_at.toISOString(),
      max_accesses: r.max_accesses,
      accesses: r.accesses,
      failed_pin_attempts: r.failed_pins,
      object_count: r.object_count,
      total_bytes: r.total_bytes,
      objects: objects.map((o) => ({ id: o.id, name: o.name, content_type: o.content_type, bytes: o.bytes, sha256: o.sha256 })),
      content_destroyed: r.content_destroyed_at !== null,
      created_at: r.created_at.toISOString(),
      ended_at: r.ended_at?.toISOString() ?? null,
    };
  }

  private async pinMatches(r: RelayRow, pin: string | undefined): Promise<boolean> {
    if (r.pin_hash === null) return true;
    if (pin === undefined || !PIN.test(pin)) return false;
    const got = await scryptAsync(pin, Buffer.from(r.pin_salt!, 'hex'), 32);
    return timingSafeEqual(got, Buffer.from(r.pin_hash, 'hex'));
  }

  /** Opens a link: one access counted, a grant for its objects returned; a wrong PIN is 403 until the relay locks (then 404 as any dead link). */
  async open(secret: string, pin: string | undefined) {
    const now = this.d.clock.now();
    const outcome = await this.d.db.transaction().execute(async (trx) => {
      const r = await relayBySecret(trx, sha256Hex(secret), true);
      if (!r) return { kind: 'gone' as const };
      if (r.content_destroyed_at === null && r.state === 'active' && now >= r.expires_at) await destroyContent(trx, r.id, now);
      if (this.status(r) !== 'active' || r.content_destroyed_at !== null) return { kind: 'gone' as const };
      if (!(await this.pinMatches(r, pin))) {
        const failed = r.failed_pins + 1;
        if (failed >= this.d.pinAttempts) {
          await updateRelay(trx, r.id, { failed_pins: failed, state: 'locked', ended_at: now });
          await destroyContent(trx, r.id, now);
          return { kind: 'locked' as const };
        }
        await updateRelay(trx, r.id, { failed_pins: failed });
        return { kind: 'wrong_pin' as const, left: this.d.pinAttempts - failed };
      }
      await updateRelay(trx, r.id, { accesses: r.accesses + 1 });
      const grant = `rlg_${randomId(43)}`;
      const grantExpires = new Date(Math.min(now.getTime() + GRANT_SECONDS * 1000, r.expires_at.getTime()));
      await insertGrant(trx, sha256Hex(grant), r.id, grantExpires);
      const objects = await objectsOf(trx, [r.id]);
      return { kind: 'open' as const, r: { ...r, accesses: r.accesses + 1 }, grant, grantExpires, objects };
    });
    if (outcome.kind === 'gone' || outcome.kind === 'locked') throw gone();
    if (outcome.kind === 'wrong_pin') {
      throw new ServiceError('forbidden', `Wrong or missing PIN; ${outcome.left} attempt${outcome.left === 1 ? '' : 's'} left before the relay locks for good`, { reason: 'wrong_pin', param: 'pin', attempts_left: outcome.left });
    }
    const r = outcome.r;
    return {
      view_only: r.view_only,
      expires_at: r.expires_at.toISOString(),
      accesses: r.accesses,
      max_accesses: r.max_accesses,
      grant: outcome.grant,
      grant_expires_at: outcome.grantExpires.toISOString(),
      objects: outcome.objects.map((o) => ({ id: o.id, name: o.name, content_type: o.content_type, bytes: o.bytes, sha256: o.sha256 })),
    };
  }

  /** One object's bytes for the grant of an access; a dead link or grant, or an object a view-only relay does not serve, is the same 404. */
  async object(secret: string, objectId: string, grant: string) {
    const now = this.d.clock.now();
    const r = await relayBySecret(this.d.db, sha256Hex(secret));
    if (!r || r.state !== 'active' || now >= r.expires_at || r.content_destroyed_at !== null) throw gone();
    const g = await grantOf(this.d.db, sha256Hex(grant));
    if (!g || g.relay_id !== r.id || now >= g.expires_at) throw gone();
    const o = await objectContent(this.d.db, r.id, objectId);
    if (!o || !o.content_sealed) throw gone();
    if (r.view_only && !VIEWABLE.test(o.content_type)) throw gone();
    return { name: o.name, contentType: o.content_type, sha256: o.sha256, viewOnly: r.view_only, bytes: this.sealer.open(o.content_sealed, contentAad(r.id, o.id)) };
  }

  /** The leader's sweep: ciphertext of expired relays destroyed, stale grants dropped. */
  async sweep(): Promise<number> {
    const now = this.d.clock.now();
    const ids = await expiredWithContent(this.d.db, now, 500);
    for (const id of ids) await this.d.db.transaction().execute((trx) => destroyContent(trx, id, now));
    await dropExpiredGrants(this.d.db, now);
    return ids.length;
  }
}
