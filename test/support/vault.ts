import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import canonicalize from 'canonicalize';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { SvcClient } from '@svc/shared/client';
import type { TestGateway } from './gateway.ts';
import type { TestChain } from './chain.ts';

/** Shapes of the vault's answers, as the tests read them. */
export interface Asset {
  id: string;
  object: 'vault_asset';
  state: 'open' | 'closed';
  roles: string[];
  name: string;
  asset_class: string;
  description: string | null;
  issued_micro_usd: number | null;
  sealed_fields: string[];
  chain_length: number;
  chain_head: string;
  closed_at: string | null;
}
export interface ChainEvent { seq: number; type: string; at: string; payload_sha256: string; prev_hash: string; hash: string }
export interface PublicChain { asset_id: string; length: number; head: string; genesis: string; events: ChainEvent[] }
export interface Holders { holders: Array<{ account_id: string; wallet: string | null; amount_micro_usd: number }>; asset_id: string; total_micro_usd: number; pending_claims_micro_usd: number; issued_micro_usd: number }
export interface Transfer { id: string; asset_id: string; status: string; amount_micro_usd: number; to_wallet: string; to_account_id: string | null; claim: { id: string; token?: string; claim_url?: string; state: string } | null }

export type Party = Awaited<ReturnType<TestGateway['signIn']>>;

export const ASSET = { name: 'Harbour Street Fund I', asset_class: 'fund', description: 'A private fund of three warehouses', identifier: 'HSF-001', jurisdiction: 'LU', terms: 'Quarterly distributions', issued_micro_usd: 1_000_000_000 } as const;

export const register = (c: SvcClient, body: Record<string, unknown> = ASSET) => c.request<Asset>('POST', '/v1/vault/assets', { body });
export const publicChain = (t: TestGateway, id: string) => t.client.request<PublicChain>('GET', `/v1/vault/chain/${id}`, { credential: null });
export const chainLength = async (t: TestGateway, id: string) => (await publicChain(t, id)).length;
export const holders = (c: SvcClient, id: string) => c.request<Holders>('GET', `/v1/vault/assets/${id}/holders`);
export const transfer = (c: SvcClient, body: Record<string, unknown>) => c.request<Transfer>('POST', '/v1/vault/transfers', { body });

const sha256 = (s: string) => `0x${createHash('sha256').update(s).digest('hex')}`;

/** Recomputes the public chain from its events alone, as docs/vault.md states the rule, and checks every link. */
export function expectChainRecomputes(c: PublicChain): void {
  let prev = c.genesis;
  expect(prev).toBe(`0x${'0'.repeat(64)}`);
  c.events.forEach((e, i) => {
    expect(e.seq).toBe(i + 1);
    expect(e.prev_hash).toBe(prev);
    expect(e.payload_sha256).toMatch(/^0x[0-9a-f]{64}$/);
    const { hash, ...rest } = e;
    expect(sha256(canonicalize({ asset_id: c.asset_id, ...rest })!)).toBe(hash);
    prev = hash;
  });
  expect(c.head).toBe(prev);
  expect(c.length).toBe(c.events.length);
}

/** Gateway environment that anchors on a local anvil chain with a funded anchoring key. */
export async function anchoringEnv(chain: TestChain): Promise<Record<string, string>> {
  const key = generatePrivateKey();
  await chain.pub.request({ method: 'anvil_setBalance' as never, params: [privateKeyToAccount(key).address, '0xde0b6b3a7640000'] as never });
  const dir = mkdtempSync(join(tmpdir(), 'svc-vault-anchor-'));
  writeFileSync(join(dir, 'anchor.key'), `${key}\n`);
  return { SVC_ANCHOR_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, confirmations: 1 }]), SVC_ANCHOR_KEY_FILE: join(dir, 'anchor.key') };
}
