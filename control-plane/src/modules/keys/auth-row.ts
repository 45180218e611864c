import { sql, type Kysely, type Selectable } from 'kysely';
import { ServiceError, effectiveScopes } from '@svc/shared';
import type { KeyAllowList, KeyPolicy, KeyPrincipal } from '../../http/auth-types.ts';
import { allowListsOf } from '../../http/key-bounds.ts';
import type { ApiKeysTable, DB } from '../../db/schema.ts';

type KeyRow = Selectable<ApiKeysTable>;

/**
 * How many rotations a presented secret is followed through to the live key. A secret more rotations away
 * than this (still in its grace window) is refused rather than acting as a rotated-out key.
 */
export const MAX_ROTATIONS = 64;

type WalkRow = Pick<KeyRow, 'id' | 'account_id' | 'parent_id' | 'scopes' | 'spend_cap_micro_usd' | 'expires_at' | 'revoked_at' | 'frozen_at' | 'rotated_to' | 'policy_id'> & {
  suspended_at: Date | null;
};

/**
 * A presented secret resolved to the key it acts as. A rotated-out secret acts as its live replacement
 * (`id`, the head of its rotations) until its grace window ends: spend, caps and the breaker count there.
 */
export type AuthRow = Pick<KeyRow, 'id' | 'account_id' | 'parent_id' | 'scopes' | 'spend_cap_micro_usd'> & {
  /** The key whose secret was presented. */
  presented_id: string;
  rotated_to: string | null;
  /** The earliest expiry, revocation and freeze along the rotations from the presented key to the live one. */
  expires_at: Date | null;
  revoked_at: Date | null;
  frozen_id: string | null;
  suspended_at: Date | null;
  chain: string[];
  /** Every key id whose change invalidates this entry: the rotations walked and the live key's ancestors. */
  ids: string[];
  /** The policy the live key carries (policies), and that policy resolved when it is live. */
  policy_id: string | null;
  policy?: KeyPolicy | null;
  /** The allow lists of the live key and its ancestors (mandate keys), when any carries one. */
  allow_lists?: KeyAllowList[];
};

/** Authenticated keys, by secret hash; bounded and short-lived, invalidated by NOTIFY on any change. */
export class AuthCache {
  private readonly map = new Map<string, { row: AuthRow; at: number }>();
  constructor(private readonly ttlMs = 30_000, private readonly max = 50_000) {}
  get(hash: string): AuthRow | undefined {
    const e = this.map.get(hash);
    if (!e) return undefined;
    if (Date.now() - e.at > this.ttlMs) {
      this.map.delete(hash);
      return undefined;
    }
    return e.row;
  }
  set(hash: string, row: AuthRow): void {
    if (this.map.size >= this.max) this.map.clear();
    this.map.set(hash, { row, at: Date.now() });
  }
  delete(hash: string): void {
    this.map.delete(hash);
  }
  *[Symbol.iterator](): IterableIterator<[string, AuthRow]> {
    for (const [h, e] of this.map) yield [h, e.row];
  }
}

/**
 * The key a secret acts as. A rotated-out secret is followed through `rotated_to` to the live key and
 * acts as it (its id, ancestors, scopes and cap), so spending through the old secret in its grace window
 * is charged to, and capped by, the replacement. It is refused when any key on that way is revoked,
 * expired (the earliest expiry counts) or frozen.
 */
export async function loadAuthRow(db: Kysely<DB>, hash: string): Promise<AuthRow | undefined> {
  const walk = await sql<WalkRow & { d: number }>`
    with recursive walk as (
      select k.id, k.account_id, k.parent_id, k.scopes, k.spend_cap_micro_usd, k.expires_at, k.revoked_at, k.frozen_at, k.rotated_to, k.policy_id, 0 as d
      from api_keys k where k.secret_hash = ${hash}
      union all
      select k.id, k.account_id, k.parent_id, k.scopes, k.spend_cap_micro_usd, k.expires_at, k.revoked_at, k.frozen_at, k.rotated_to, k.policy_id, w.d + 1
      from api_keys k join walk w on k.id = w.rotated_to where w.d < ${MAX_ROTATIONS}
    )
    select w.*, a.suspended_at from walk w join accounts a on a.id = w.account_id order by w.d`.execute(db);
  const presented = walk.rows[0];
  const head = walk.rows[walk.rows.length - 1];
  if (!presented || !head) return undefined;
  if (head.rotated_to !== null) {
    throw new ServiceError('invalid_credential', `This API key was rotated more than ${MAX_ROTATIONS} times since; use its live replacement`);
  }
  const earliest = (dates: Array<Date | null>) => dates.reduce<Date | null>((m, d) => (d && (!m || d < m) ? d : m), null);
  const chain = await sql<{ id: string; allowed_models: string[] | null; allowed_routes: string[] | null }>`
    with recursive up(id, parent_id, allowed_models, allowed_routes, d) as (
      select id, parent_id, allowed_models, allowed_routes, 0 from api_keys where id = ${head.id}
      union all select k.id, k.parent_id, k.allowed_models, k.allowed_routes, up.d + 1 from api_keys k join up on k.id = up.parent_id
    ) select id, allowed_models, allowed_routes from up order by d`.execute(db);
  const ids = chain.rows.map((r) => r.id);
  return {
    id: head.id,
    account_id: head.account_id,
    parent_id: head.parent_id,
    scopes: head.scopes,
    spend_cap_micro_usd: head.spend_cap_micro_usd === null ? null : Number(head.spend_cap_micro_usd),
    presented_id: presented.id,
    rotated_to: presented.rotated_to,
    expires_at: earliest(walk.rows.map((r) => r.expires_at)),
    revoked_at: earliest(walk.rows.map((r) => r.revoked_at)),
    frozen_id: walk.rows.find((r) => r.frozen_at)?.id ?? null,
    suspended_at: presented.suspended_at,
    chain: ids,
    ids: [...walk.rows.map((r) => r.id), ...ids],
    allow_lists: allowListsOf(chain.rows),
    policy_id: head.policy_id, // policies
  };
}

/** The principal a key's row stands for at `now`, or the refusal of it (revoked, expired, suspended, frozen). */
export function admitRow(row: AuthRow, now: Date): KeyPrincipal {
  if (row.revoked_at) throw new ServiceError('invalid_credential', 'This API key has been revoked');
  if (row.expires_at && row.expires_at.getTime() <= now.getTime()) {
    throw new ServiceError('invalid_credential', row.rotated_to ? `This API key was rotated to ${row.rotated_to} and its grace window has ended` : 'This API key has expired');
  }
  if (row.suspended_at) throw new ServiceError('account_suspended', 'This account is suspended');
  if (row.frozen_id) {
    throw new ServiceError('circuit_breaker_tripped', 'This API key was frozen by the spend circuit breaker; its owner can unfreeze it with POST /v1/keys/{id}/unfreeze', { key_id: row.frozen_id });
  }
  return {
    kind: 'key',
    accountId: row.account_id,
    keyId: row.id,
    parentId: row.parent_id,
    chain: row.chain,
    scopes: effectiveScopes(row.scopes),
    spendCapMicroUsd: row.spend_cap_micro_usd,
    expiresAt: row.expires_at,
    policy: row.policy ?? null, // policies
    ...(row.allow_lists ? { allowLists: row.allow_lists } : {}),
  };
}
