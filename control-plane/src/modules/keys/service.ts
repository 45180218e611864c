import { sql, type Kysely, type Selectable } from 'kysely';
import {
  PREFIX,
  ServiceError,
  conflict,
  invalid,
  newId,
  newSecret,
  notFound,
  sha256Hex,
  type Clock,
  type Scope,
} from '@svc/shared';
import type { ApiKeysTable, DB } from '../../db/schema.ts';
import { ThrottledTouch } from '../../db/throttled-touch.ts';
import type { KeyPolicy, KeyPrincipal } from '../../http/auth-types.ts';
import type { PolicyInput } from '../policies/content.ts'; // policies
import type { Database } from '../../db/database.ts';
import { AuthCache, admitRow, loadAuthRow, type AuthRow } from './auth-row.ts';
import { instantOf } from '../../http/fields.ts';

export interface KeyOptions {
  rotationGraceSeconds: number;
}

export interface KeyInput {
  name?: string | undefined;
  scopes?: Scope[] | undefined;
  spend_cap_micro_usd?: number | undefined;
  expires_at?: string | undefined;
  /** A policy for the key (policies module): attached, or added to the parent key's for a delegated key. */
  policy?: PolicyInput | undefined; // policies
}

/** What the policies module does for keys (wired by gateway.ts): attach a policy where a key is minted, resolve the one a key carries. */
export interface KeyPolicies {
  attach(accountId: string, input: PolicyInput, parentPolicyId: string | null, db: Kysely<DB>): Promise<{ id: string }>;
  /** The live policy (null once revoked); read when a key's credentials are loaded, cached with them. */
  active(accountId: string, policyId: string): Promise<KeyPolicy | null>;
} // policies

/** What modules that mint keys for their own resources (mandates, ghost sessions) set beside a key's input. */
export interface ManagedKeyInput extends KeyInput {
  /** Allow lists (http/key-bounds.ts), checked on every request of the key and of keys below it; null: any. */
  allowed_models?: string[] | null;
  allowed_routes?: string[] | null;
  /** The module whose resource the key is ('mandate', 'ghost', 'agent'): it is never rotated, only revoked or expired. */
  managed_by?: 'mandate' | 'ghost' | 'agent';
  /**
   * The policy the key carries (an id PoliciesService.attach returned); with `policy` set, the policy that one is
   * added to. A delegated key gets its parent's when this is not set.
   */
  policy_id?: string | null; // policies
}

type KeyRow = Selectable<ApiKeysTable>;
export type KeyStatus = 'active' | 'frozen' | 'expiring' | 'expired' | 'revoked';

const MAX_DEPTH = 8;
export const KEYS_CHANNEL = 'svc_keys';

/** API keys: minting, listing, revocation (cascading), rotation with grace, unfreeze, delegation. Owns api_keys. */
export class KeysService {
  private readonly touched: ThrottledTouch;
  private readonly cache = new AuthCache();
  private unlisten: (() => Promise<void>) | undefined;
  /** Set by gateway.ts (policies module); without it a key input's `policy` is refused. */
  policies: KeyPolicies | null = null; // policies
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly opts: KeyOptions,
  ) {
    this.touched = new ThrottledTouch((id, now) => this.db.updateTable('api_keys').set({ last_used_at: now }).where('id', '=', id).execute());
  }

  private status(k: KeyRow, now: Date): KeyStatus {
    if (k.revoked_at) return 'revoked';
    if (k.expires_at && k.expires_at.getTime() <= now.getTime()) return 'expired';
    if (k.frozen_at) return 'frozen';
    if (k.rotated_to) return 'expiring';
    return 'active';
  }

  private view(k: KeyRow, now: Date, ownSpend?: number) {
    return {
      id: k.id,
      object: 'api_key' as const,
      name: k.name,
      prefix: k.prefix,
      parent_id: k.parent_id,
      scopes: k.scopes,
      status: this.status(k, now),
      spend_cap_micro_usd: k.spend_cap_micro_usd,
      spent_micro_usd: ownSpend ?? k.spent_micro_usd,
      subtree_spent_micro_usd: k.spent_micro_usd,
      created_at: k.created_at.toISOString(),
      expires_at: k.expires_at?.toISOString() ?? null,
      revoked_at: k.revoked_at?.toISOString() ?? null,
      frozen_at: k.frozen_at?.toISOString() ?? null,
      frozen_reason: k.frozen_reason,
      rotated_to: k.rotated_to,
      last_used_at: k.last_used_at?.toISOString() ?? null,
      policy_id: k.policy_id ?? null, // policies
      allowed_models: k.allowed_models ?? null,
      allowed_routes: k.allowed_routes ?? null,
      managed_by: k.managed_by ?? null,
    };
  }

  private parseExpiry(expiresAt: string | undefined, now: Date): Date | null {
    if (expiresAt === undefined) return null;
    const d = instantOf(expiresAt, 'expires_at');
    if (d.getTime() <= now.getTime()) throw invalid('expires_at: must be in the future', 'expires_at');
    return d;
  }

  private async insert(
    trx: Kysely<DB>,
    accountId: string,
    parentId: string | null,
    input: Required<Pick<KeyInput, 'scopes'>> & ManagedKeyInput,
    expires: Date | null,
    now: Date,
    carry?: Pick<KeyRow, 'spent_micro_usd' | 'window_start' | 'window_spent_micro_usd' | 'frozen_at' | 'frozen_reason'>,
  ) {
    const policyId = await this.policyFor(trx, accountId, input); // policies
    const secret = newSecret(PREFIX.apiKeySecret);
    const row = await trx
      .insertInto('api_keys')
      .values({
        id: newId(PREFIX.apiKeyId),
        account_id: accountId,
        parent_id: parentId,
        name: input.name ?? null,
        prefix: secret.slice(0, 14),
        secret_hash: sha256Hex(secret),
        scopes: JSON.stringify(input.scopes),
        spend_cap_micro_usd: input.spend_cap_micro_usd ?? null,
        created_at: now,
        expires_at: expires,
        revoked_at: null,
        frozen_at: null,
        frozen_reason: null,
        rotated_to: null,
        last_used_at: null,
        allowed_models: input.allowed_models ? JSON.stringify(input.allowed_models) : null,
        allowed_routes: input.allowed_routes ? JSON.stringify(input.allowed_routes) : null,
        managed_by: input.managed_by ?? null,
        policy_id: policyId, // policies
        ...carry,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { row, secret };
  }

  /** A new key; inside the caller's transaction when `db` is one (a key minted together with what uses it). */
  async create(accountId: string, input: ManagedKeyInput, db: Kysely<DB> = this.db) {
    if (input.policy && db === this.db) return this.db.transaction().execute((trx) => this.createIn(accountId, input, trx)); // policies: the policy and the key commit together
    return this.createIn(accountId, input, db);
  }

  private async createIn(accountId: string, input: ManagedKeyInput, db: Kysely<DB>) {
    const now = this.clock.now();
    const expires = this.parseExpiry(input.expires_at, now);
    const { row, secret } = await this.insert(db, accountId, null, { ...input, scopes: input.scopes ?? [] }, expires, now);
    return { ...this.view(row, now), key: secret };
  }

  /**
   * Every key of the account, newest first, each with the spend of its delegated subtree.
   *
   * spent_micro_usd is charged on a key and every ancestor, so it already is the subtree's spend, and a
   * key's own spend is that minus its direct children's. Rotation moves a key's spend to its replacement
   * (see `rotate`), and whatever still lands on the old row afterwards (requests that were already in flight)
   * is reported on the replacement too: a rotated-out key lists 0, and the live key lists the spend of
   * itself and every key rotated into it, minus the children of all of them. So no figure is negative and
   * the own spends of an account's keys add up to what its keys were charged.
   */
  async list(accountId: string) {
    const now = this.clock.now();
    const rows = await this.db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id').execute();
    const byId = new Map(rows.map((r) => [r.id, r]));
    const live = (id: string): string => {
      let r = byId.get(id);
      for (let i = 0; r?.rotated_to && byId.has(r.rotated_to) && i < rows.length; i++) r = byId.get(r.rotated_to);
      return r?.id ?? id;
    };
    const subtree = new Map<string, number>();
    const children = new Map<string, number>();
    const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v);
    for (const r of rows) {
      add(subtree, live(r.id), r.spent_micro_usd);
      if (r.parent_id) add(children, live(r.parent_id), r.spent_micro_usd);
    }
    return rows.map((r) => {
      if (live(r.id) !== r.id) return { ...this.view(r, now, 0), subtree_spent_micro_usd: 0 };
      const total = subtree.get(r.id) ?? 0;
      return { ...this.view(r, now, total - (children.get(r.id) ?? 0)), subtree_spent_micro_usd: total };
    });
  }

  private async owned(trx: Kysely<DB>, accountId: string, id: string): Promise<KeyRow> {
    const row = await trx.selectFrom('api_keys').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    if (!row) throw notFound('API key');
    return row;
  }

  /**
   * Revokes a key and its whole delegated subtree, including the keys rotated into it (their secrets act as
   * this key through their grace windows). Revoking a rotated-out key leaves its replacement alone. Idempotent.
   */
  async revoke(accountId: string, id: string) {
    const res = await this.db.transaction().execute((trx) => this.revokeWithin(trx, accountId, id));
    await this.accountChanged(accountId);
    return res;
  }

  /**
   * `revoke` inside the caller's transaction (a key revoked together with what it belongs to). The caller
   * calls `accountChanged` once it committed, so no process keeps the key cached as live.
   */
  async revokeWithin(trx: Kysely<DB>, accountId: string, id: string) {
    const now = this.clock.now();
    await this.owned(trx, accountId, id);
    const r = await sql<{ id: string }>`
      with recursive tree(id) as (
        select id from api_keys where id = ${id} and account_id = ${accountId}
        union
        select k.id from api_keys k join tree t on k.parent_id = t.id or k.rotated_to = t.id
      )
      update api_keys set revoked_at = ${now}
      where id in (select id from tree) and revoked_at is null
      returning id`.execute(trx);
    return { id, revoked: true, revoked_ids: r.rows.map((x) => x.id) };
  }

  /** One key of the account as listed (its own spend not split from its subtree's), or 404. */
  async get(accountId: string, id: string, db: Kysely<DB> = this.db) {
    return this.view(await this.owned(db, accountId, id), this.clock.now());
  }

  /** Keys of the account by id, as `get` shows them; ids of other accounts are left out. */
  async getMany(accountId: string, ids: readonly string[], db: Kysely<DB> = this.db) {
    const now = this.clock.now();
    const rows = ids.length ? await db.selectFrom('api_keys').selectAll().where('account_id', '=', accountId).where('id', 'in', [...ids]).execute() : [];
    return new Map(rows.map((r) => [r.id, this.view(r, now)]));
  }

  /**
   * Moves a live key's expiry (a ghost session extended), inside the caller's transaction; the caller calls
   * `accountChanged` once it committed. A revoked or expired key is not revived: 409.
   */
  async setExpiryWithin(trx: Kysely<DB>, accountId: string, id: string, expiresAt: Date) {
    const k = await trx.selectFrom('api_keys').selectAll().where('id', '=', id).where('account_id', '=', accountId).forUpdate().executeTakeFirst();
    if (!k) throw notFound('API key');
    const st = this.status(k, this.clock.now());
    if (st === 'revoked' || st === 'expired') throw conflict(`API key ${id} is ${st}; its expiry cannot be moved`);
    await trx.updateTable('api_keys').set({ expires_at: expiresAt }).where('id', '=', id).execute();
  }

  /**
   * A scope-identical replacement. The old secret keeps working for the grace window, then expires; its
   * delegated children move to the replacement so cascades and subtree spend follow the live key.
   *
   * The replacement takes over the old key's money state, so rotating never resets a cap or the breaker:
   * its lifetime spend (spent_micro_usd, which the cap counts), the breaker window (window_start,
   * window_spent_micro_usd) and a breaker freeze move to it, and the old row's spend drops to 0 (moved,
   * not copied, so the parent's own spend and the list stay exact). Through its grace window the old secret
   * acts as the replacement (see `loadAuthRow` in auth-row.ts), so what it spends counts against the replacement's cap.
   *
   * Holds already open at this moment keep the key chain they were made with, and settle against it
   * (svc_settle charges, and releases the hold from, exactly the keys of that chain). So the old row keeps
   * its held_micro_usd, which those holds release (nothing is left stranded or driven below 0), and the
   * replacement starts with none held. Their costs land on the old row and on the moved children, where the
   * list counts them as the replacement's (see `list`): nothing is lost. What they cost is not in the
   * replacement's own spent_micro_usd, so its cap may be exceeded by at most the requests in flight at the
   * instant of rotation, once; the old key's cap (and its ancestors') still bounds them.
   */
  async rotate(accountId: string, id: string, graceSeconds?: number) {
    const now = this.clock.now();
    const grace = graceSeconds ?? this.opts.rotationGraceSeconds;
    const res = await this.db.transaction().execute(async (trx) => {
      // The key and its children are written below: lock them in id order, the order the money path locks keys in.
      await trx
        .selectFrom('api_keys')
        .select('id')
        .where('account_id', '=', accountId)
        .where((eb) => eb.or([eb('id', '=', id), eb('parent_id', '=', id)]))
        .orderBy('id')
        .forUpdate()
        .execute();
      const old = await this.owned(trx, accountId, id);
      const st = this.status(old, now);
      if (st === 'revoked' || st === 'expired') throw conflict(`API key ${id} is ${st} and cannot be rotated`);
      if (old.rotated_to) throw conflict(`API key ${id} was already rotated to ${old.rotated_to}`);
      if (old.managed_by) throw conflict(`API key ${id} belongs to a ${old.managed_by === 'ghost' ? 'ghost session' : old.managed_by === 'agent' ? 'hosted agent' : old.managed_by} and is never rotated; revoke it there and create a new one`);
      const { row, secret } = await this.insert(
        trx,
        accountId,
        old.parent_id,
        { name: old.name ?? undefined, scopes: old.scopes as Scope[], spend_cap_micro_usd: old.spend_cap_micro_usd ?? undefined, allowed_models: old.allowed_models, allowed_routes: old.allowed_routes, policy_id: old.policy_id },
        old.expires_at,
        now,
        {
          spent_micro_usd: old.spent_micro_usd,
          window_start: old.window_start,
          window_spent_micro_usd: old.window_spent_micro_usd,
          frozen_at: old.frozen_at,
          frozen_reason: old.frozen_reason,
        },
      );
      const graceEnd = new Date(now.getTime() + grace * 1000);
      const oldExpiry = old.expires_at && old.expires_at < graceEnd ? old.expires_at : graceEnd;
      const updated = await trx
        .updateTable('api_keys')
        .set({ rotated_to: row.id, expires_at: oldExpiry, spent_micro_usd: 0, frozen_at: null, frozen_reason: null })
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      const moved = await trx.updateTable('api_keys').set({ parent_id: row.id }).where('parent_id', '=', id).returning('spent_micro_usd').execute();
      const childSpend = moved.reduce((a, c) => a + c.spent_micro_usd, 0);
      return {
        ...this.view(row, now, row.spent_micro_usd - childSpend),
        key: secret,
        replaces: { id, expires_at: oldExpiry.toISOString(), status: this.status(updated, now) },
      };
    });
    await this.accountChanged(accountId);
    return res;
  }

  async freeze(keyId: string, reason: string): Promise<void> {
    const r = await this.db.updateTable('api_keys').set({ frozen_at: this.clock.now(), frozen_reason: reason }).where('id', '=', keyId).returning('account_id').executeTakeFirst();
    if (r) await this.accountChanged(r.account_id);
  }

  async unfreeze(accountId: string, id: string) {
    const now = this.clock.now();
    const res = await this.db.transaction().execute(async (trx) => {
      const k = await this.owned(trx, accountId, id);
      const st = this.status(k, now);
      if (st === 'revoked' || st === 'expired') throw conflict(`API key ${id} is ${st}; unfreezing cannot revive it`);
      const row = await trx.updateTable('api_keys').set({ frozen_at: null, frozen_reason: null }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
      return { ...this.view(row, now), was_frozen: k.frozen_at !== null };
    });
    await this.accountChanged(accountId);
    return res;
  }

  /**
   * A bounded child of the calling key: scopes a subset, spend cap and expiry within the parent's. Inside the
   * caller's transaction when `db` is one (a mandate's key, written with the mandate).
   */
  async delegate(parent: KeyPrincipal, input: ManagedKeyInput, db?: Kysely<DB>) {
    const now = this.clock.now();
    const scopes = input.scopes ?? parent.scopes;
    const missing = scopes.filter((s) => !parent.scopes.includes(s));
    if (missing.length) {
      throw new ServiceError('insufficient_scope', `The parent key does not hold scope(s) ${missing.join(', ')}; a delegated key's scopes must be a subset`, { param: 'scopes' });
    }
    let expires = this.parseExpiry(input.expires_at, now);
    if (parent.expiresAt) {
      if (expires && expires > parent.expiresAt) throw invalid(`expires_at: must not be later than the parent key's expiry (${parent.expiresAt.toISOString()})`, 'expires_at');
      expires ??= parent.expiresAt;
    }
    const mint = async (trx: Kysely<DB>) => {
      const p = await trx.selectFrom('api_keys').selectAll().where('id', '=', parent.keyId).forUpdate().executeTakeFirstOrThrow();
      let cap = input.spend_cap_micro_usd ?? null;
      if (p.spend_cap_micro_usd !== null) {
        const remaining = Math.max(0, p.spend_cap_micro_usd - p.spent_micro_usd);
        if (cap !== null && cap > remaining) throw invalid(`spend_cap_micro_usd: must not exceed the parent's remaining cap (${remaining})`, 'spend_cap_micro_usd');
        cap ??= remaining;
      }
      const depth = await sql<{ d: number }>`
        with recursive up(id, parent_id, d) as (
          select id, parent_id, 1 from api_keys where id = ${parent.keyId}
          union all select k.id, k.parent_id, up.d + 1 from api_keys k join up on k.id = up.parent_id
        ) select max(d)::int as d from up`.execute(trx);
      if ((depth.rows[0]?.d ?? 1) >= MAX_DEPTH) throw invalid(`delegation is limited to ${MAX_DEPTH} levels`);
      const { row, secret } = await this.insert(trx, parent.accountId, parent.keyId, { ...input, scopes: effectiveScopesOf(scopes, parent.scopes), spend_cap_micro_usd: cap ?? undefined, policy_id: input.policy_id ?? p.policy_id }, expires, now);
      return { ...this.view(row, now), key: secret };
    };
    return db ? mint(db) : this.db.transaction().execute(mint);
  }

  /**
   * Resolves an API key secret for the auth layer: at once on a cache hit (a refusal is thrown), after one
   * round trip on a miss.
   */
  authenticate(secret: string): KeyPrincipal | Promise<KeyPrincipal> {
    return this.resolve(sha256Hex(secret));
  }

  /**
   * The principal of a key by id, checked exactly as `authenticate` checks a presented secret (revoked,
   * expired, suspended, frozen): for work that runs later under the key that asked for it (batches).
   */
  async principalOf(keyId: string): Promise<KeyPrincipal> {
    const k = await this.db.selectFrom('api_keys').select('secret_hash').where('id', '=', keyId).executeTakeFirst();
    if (!k) throw new ServiceError('invalid_credential', 'Unknown API key');
    return this.resolve(k.secret_hash);
  }

  /** A key principal resolved again from the database (its cached entry dropped): after a rotation it is the live key's. */
  async refreshPrincipal(p: KeyPrincipal): Promise<KeyPrincipal> {
    this.invalidate(p.keyId);
    return this.principalOf(p.keyId);
  }

  private resolve(hash: string): KeyPrincipal | Promise<KeyPrincipal> {
    const row = this.cache.get(hash);
    if (row) return this.admit(row);
    return loadAuthRow(this.db, hash).then(async (loaded) => {
      if (!loaded) throw new ServiceError('invalid_credential', 'Unknown API key');
      if (loaded.policy_id && this.policies) loaded.policy = await this.policies.active(loaded.account_id, loaded.policy_id); // policies
      this.cache.set(hash, loaded);
      return this.admit(loaded);
    });
  }

  /** The principal of a key's row (its use noted), or the refusal of it now. */
  private admit(row: AuthRow): KeyPrincipal {
    const now = this.clock.now();
    const p = admitRow(row, now);
    this.touched.touch(row.presented_id, now);
    return p;
  }

  /**
   * The policy a new key carries: `input.policy` attached (added to `input.policy_id`, the parent key's, for a
   * delegated key), else `input.policy_id`. A refusal (400 naming the field) writes nothing.
   */
  private async policyFor(trx: Kysely<DB>, accountId: string, input: ManagedKeyInput): Promise<string | null> {
    if (!input.policy) return input.policy_id ?? null;
    if (!this.policies) throw invalid('policy: policies are not available on this gateway', 'policy');
    return (await this.policies.attach(accountId, input.policy, input.policy_id ?? null, trx)).id;
  } // policies

  /** Drops cached credentials of a key (and keys below it), or of a whole account ("account:<id>"). */
  invalidate(target: string): void {
    for (const l of this.changeListeners) l(target);
    const account = target.startsWith('account:') ? target.slice(8) : undefined;
    for (const [h, r] of this.cache) {
      if (account ? r.account_id === account : r.ids.includes(target)) this.cache.delete(h);
    }
  }

  private readonly changeListeners: Array<(target: string) => void> = [];

  /** Called with every invalidation (a key id or "account:<id>"), from this process at once and from others by NOTIFY. */
  onChange(listener: (target: string) => void): void {
    this.changeListeners.push(listener);
  }

  /** Tells every process (and this one, at once) that keys of an account changed. */
  async accountChanged(accountId: string): Promise<void> {
    this.invalidate(`account:${accountId}`);
    await this.db.selectNoFrom((eb) => eb.fn('pg_notify', [eb.val(KEYS_CHANNEL), eb.val(`account:${accountId}`)]).as('n')).execute();
  }

  async start(database: Database): Promise<void> {
    this.unlisten = await database.listen(KEYS_CHANNEL, (payload) => this.invalidate(payload));
  }

  async stop(): Promise<void> {
    await this.unlisten?.();
  }
}

/** A child that asks for every scope its parent holds is stored with the explicit list, never as "all". */
function effectiveScopesOf(requested: Scope[], parentScopes: Scope[]): Scope[] {
  return requested.length === 0 ? parentScopes : requested;
}
