import type { Kysely } from 'kysely';
import { newId, randomId } from '@svc/shared';
import type { DB } from '../../control-plane/src/db/schema.ts';
import type { KeyPrincipal } from '../../control-plane/src/http/auth-types.ts';
import type { Metering } from '../../control-plane/src/modules/money/metering.ts';

/**
 * An account with a chain of `chainLength` API keys (the first is the one used, each the parent's child),
 * each with spend cap `cap`, granted `credit` micro-USD through the ledger; returns the key principal.
 * For money-path tests that work below the HTTP layer.
 */
export async function tenant(db: Kysely<DB>, metering: Metering, opts: { credit: number; cap?: number | null; chainLength?: number }): Promise<KeyPrincipal> {
  const cap = opts.cap ?? null;
  const acct = newId('acct_');
  await db.insertInto('accounts').values({ id: acct, created_at: new Date(), suspended_at: null, suspended_reason: null }).execute();
  const chain: string[] = [];
  for (let i = 0; i < (opts.chainLength ?? 1); i++) {
    const id = newId('key_');
    await db
      .insertInto('api_keys')
      .values({ id, account_id: acct, parent_id: chain[0] ?? null, name: null, prefix: 'x', secret_hash: randomId(40), scopes: '[]', spend_cap_micro_usd: cap, created_at: new Date(), expires_at: null, revoked_at: null, frozen_at: null, frozen_reason: null, rotated_to: null, last_used_at: null })
      .execute();
    chain.unshift(id);
  }
  await metering.credit(acct, opts.credit, 'grant', `grant-${acct}`);
  return { kind: 'key', accountId: acct, keyId: chain[0]!, parentId: chain[1] ?? null, chain, scopes: [], spendCapMicroUsd: cap, expiresAt: null };
}
