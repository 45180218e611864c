import type { Kysely } from 'kysely';
import { ServiceError, effectiveScopes, newId, type Clock, type Scope } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { IdentityService } from '../identity/service.ts';
import type { KeysService } from '../keys/service.ts';
import { deleteGhost, ghostOf, insertGhost, listGhosts, liveGhostCount, purgeExpiredGhosts, setGhostExpiry, type GhostRow } from './store.ts';
import type { PolicyInput } from '../policies/content.ts';

export const GHOST_ID_PREFIX = 'ghost_';
/** A ghost's whole life, from its start to its (extended) expiry. */
export const GHOST_MAX_LIFETIME_SECONDS = 24 * 3600;
export const GHOST_DEFAULT_TTL_SECONDS = 3600;
/** Ghosts an account holds at once (not yet expired). */
export const MAX_LIVE_GHOSTS = 100;

export interface GhostDeps {
  db: Kysely<DB>;
  clock: Clock;
  keys: KeysService;
  identity: IdentityService;
}

export interface GhostInput {
  name?: string | undefined;
  scopes?: Scope[] | undefined;
  spend_cap_micro_usd?: number | undefined;
  ttl_seconds?: number | undefined;
  /** A policy for the ghost key (policies module). */
  policy?: PolicyInput | undefined;
}

type KeyView = Awaited<ReturnType<KeysService['get']>>;

/**
 * Ghost sessions: an ephemeral scoped API key, shown once, that lives at most 24 hours in all. Its expiry is
 * the key's, which the key path checks on every request against the clock; destroying a ghost revokes the
 * key and deletes its metadata, and the leader deletes the metadata of expired ones. Owns ghost_sessions;
 * the key is the keys module's (its row, revoked, stays as the record of what it spent).
 */
export class GhostService {
  constructor(private readonly d: GhostDeps) {}

  async create(accountId: string, input: GhostInput) {
    const now = this.d.clock.now();
    const expires = new Date(now.getTime() + (input.ttl_seconds ?? GHOST_DEFAULT_TTL_SECONDS) * 1000);
    return this.d.db.transaction().execute(async (trx) => {
      // Starts of one account run one at a time from here, so the limit holds under concurrency.
      await this.d.identity.lockAccount(trx, accountId);
      const live = await liveGhostCount(trx, accountId, now);
      if (live >= MAX_LIVE_GHOSTS) {
        throw new ServiceError('conflict', `An account holds at most ${MAX_LIVE_GHOSTS} live ghost sessions and this one holds ${live}; destroy one (POST /v1/ghost/sessions/:id/destroy) or let one expire`, {
          reason: 'ghost_limit',
          limit: MAX_LIVE_GHOSTS,
        });
      }
      const key = await this.d.keys.create(
        accountId,
        { name: 'Ghost session', scopes: effectiveScopes(input.scopes), spend_cap_micro_usd: input.spend_cap_micro_usd, expires_at: expires.toISOString(), managed_by: 'ghost', policy: input.policy },
        trx,
      );
      const row = await insertGhost(trx, {
        id: newId(GHOST_ID_PREFIX),
        account_id: accountId,
        key_id: key.id,
        name: input.name ?? null,
        scopes: JSON.stringify(effectiveScopes(input.scopes)),
        spend_cap_micro_usd: input.spend_cap_micro_usd ?? null,
        created_at: now,
        expires_at: expires,
      });
      return { ...view(row, key, now), key: key.key };
    });
  }

  /** The 100 newest ghosts of the account (expired ones until the leader purges them). */
  async list(accountId: string) {
    const rows = await listGhosts(this.d.db, accountId);
    const keys = await this.d.keys.getMany(accountId, rows.map((r) => r.key_id));
    const now = this.d.clock.now();
    return rows.map((r) => view(r, keys.get(r.key_id), now));
  }

  async get(accountId: string, id: string) {
    const row = await ghostOf(this.d.db, accountId, id);
    return view(row, (await this.d.keys.getMany(accountId, [row.key_id])).get(row.key_id), this.d.clock.now());
  }

  /** Moves the expiry `seconds` later, while the whole life stays within 24 hours; an expired ghost stays expired. */
  async extend(accountId: string, id: string, seconds: number) {
    const res = await this.d.db.transaction().execute(async (trx) => {
      const row = await ghostOf(trx, accountId, id, true);
      const now = this.d.clock.now();
      if (row.expires_at.getTime() <= now.getTime()) throw new ServiceError('conflict', `Ghost session ${id} has expired; start a new one`, { reason: 'expired' });
      const latest = row.created_at.getTime() + GHOST_MAX_LIFETIME_SECONDS * 1000;
      const expires = new Date(row.expires_at.getTime() + seconds * 1000);
      if (expires.getTime() > latest) {
        const extendable = Math.floor((latest - row.expires_at.getTime()) / 1000);
        throw new ServiceError(
          'invalid_request',
          `seconds: a ghost session lives at most 24 hours (${GHOST_MAX_LIFETIME_SECONDS} s) in total from its start; this one can be extended by at most ${extendable} s more`,
          { param: 'seconds', max_lifetime_seconds: GHOST_MAX_LIFETIME_SECONDS, extendable_seconds: extendable },
        );
      }
      await this.d.keys.setExpiryWithin(trx, accountId, row.key_id, expires);
      const updated = await setGhostExpiry(trx, id, expires);
      return { updated, key: await this.d.keys.get(accountId, row.key_id, trx), now };
    });
    await this.d.keys.accountChanged(accountId); // no process keeps the key cached with its old expiry
    return view(res.updated, res.key, res.now);
  }

  /** Revokes the key (and anything delegated below it) and deletes the ghost's metadata. */
  async destroy(accountId: string, id: string) {
    const res = await this.d.db.transaction().execute(async (trx) => {
      const row = await ghostOf(trx, accountId, id, true);
      const r = await this.d.keys.revokeWithin(trx, accountId, row.key_id);
      await deleteGhost(trx, id);
      return { id, object: 'ghost_session' as const, destroyed: true as const, key_id: row.key_id, revoked_ids: r.revoked_ids };
    });
    await this.d.keys.accountChanged(accountId);
    return res;
  }

  /** The leader's sweep: metadata of expired ghosts goes (their keys are refused from the instant they expire). */
  async purgeExpired(): Promise<number> {
    return purgeExpiredGhosts(this.d.db, this.d.clock.now());
  }
}

function view(r: GhostRow, key: KeyView | undefined, now: Date) {
  const left = r.expires_at.getTime() - now.getTime();
  const status = !key || key.status === 'revoked' ? 'revoked' : left <= 0 || key.status === 'expired' ? 'expired' : key.status === 'frozen' ? 'frozen' : 'active';
  return {
    id: r.id,
    object: 'ghost_session' as const,
    name: r.name,
    status: status as 'active' | 'frozen' | 'expired' | 'revoked',
    key_id: r.key_id,
    key_prefix: key?.prefix ?? null,
    scopes: r.scopes,
    spend_cap_micro_usd: r.spend_cap_micro_usd,
    spent_micro_usd: key?.subtree_spent_micro_usd ?? 0,
    created_at: r.created_at.toISOString(),
    expires_at: r.expires_at.toISOString(),
    seconds_remaining: Math.max(0, Math.floor(left / 1000)),
    lifetime_seconds: Math.round((r.expires_at.getTime() - r.created_at.getTime()) / 1000),
    max_lifetime_seconds: GHOST_MAX_LIFETIME_SECONDS,
  };
}
