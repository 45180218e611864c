import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Hex } from 'viem';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startChain, type TestChain } from './support/chain.ts';
import { expectApiError } from './support/expect-error.ts';
import { buf, hex, mth, rootFromPath } from './support/merkle.ts';
import { ASSET, anchoringEnv, chainLength, expectChainRecomputes, publicChain, register, type Asset, type Party } from './support/vault.ts';

/**
 * Vault assets end to end: registration with every field sealed at rest, who sees what (404 for a caller
 * with no part in the asset), closing, and the public chain recomputed by the test from its events alone,
 * with its anchor checked on a local anvil chain.
 */
interface AnchorBatch {
  asset_id: string;
  root: string;
  event_count: number;
  event_hashes: string[];
  anchor: { state: string; root: string | null; leaf_index: number | null; tree_size: number | null; proof: string[]; anchors: Array<{ backend: string; state: string; tx_hash: string | null }> };
  anchor_document_url: string | null;
}

let chain: TestChain;
let t: TestGateway;
let issuer: Party;
let stranger: Party;
beforeAll(async () => {
  chain = await startChain();
  t = await startTestGateway({ env: await anchoringEnv(chain) });
  issuer = await t.signIn();
  stranger = await t.signIn();
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('vault assets', () => {
  it('registers an asset with every field sealed on its own; the issuer holds the whole issue', async () => {
    const a = await register(issuer.client);
    expect(a).toMatchObject({ object: 'vault_asset', state: 'open', roles: ['issuer', 'holder'], ...ASSET, closed_at: null, chain_length: 1 });
    expect(a.id).toMatch(/^vast_[0-9a-z]{24}$/);
    expect(a.sealed_fields).toEqual(['name', 'asset_class', 'description', 'identifier', 'jurisdiction', 'terms', 'issued_micro_usd']);
    // At rest: ciphertext only, each field under its own nonce.
    const row = await t.gw.database.db.selectFrom('vault_assets').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow();
    const stored = JSON.stringify(Object.values(row).map((v) => (v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : v)));
    for (const v of ['Harbour', 'warehouses', 'HSF-001', 'Quarterly', '1000000000']) expect(stored).not.toContain(v);
    const ivs = [row.name_sealed, row.asset_class_sealed, row.description_sealed!, row.terms_sealed!, row.issued_sealed].map((s) => Buffer.from(s).subarray(1, 13).toString('hex'));
    expect(new Set(ivs).size).toBe(ivs.length);

    const detail = await issuer.client.request<Asset & { events: Array<{ type: string; payload: Record<string, unknown> | null }> }>('GET', `/v1/vault/assets/${a.id}`);
    expect(detail.events.map((e) => e.type)).toEqual(['asset_registered']);
    expect(detail.events[0]!.payload).toMatchObject({ type: 'asset_registered', issuer_account_id: issuer.accountId, issued_micro_usd: ASSET.issued_micro_usd });
    const mine = await issuer.client.request<{ assets: Asset[] }>('GET', '/v1/vault/assets');
    expect(mine.assets.map((x) => x.id)).toContain(a.id);
  });

  it('hides an asset from a caller with no part in it: 404 as for an unknown id, and nothing in their list', async () => {
    const a = await register(issuer.client);
    const unknown = await expectApiError(stranger.client.request('GET', '/v1/vault/assets/vast_unknown'), 404, 'not_found');
    const hidden = await expectApiError(stranger.client.request('GET', `/v1/vault/assets/${a.id}`), 404, 'not_found');
    expect(hidden.message).toBe(unknown.message);
    await expectApiError(stranger.client.request('POST', `/v1/vault/assets/${a.id}/close`), 404, 'not_found');
    expect((await stranger.client.request<{ assets: Asset[] }>('GET', '/v1/vault/assets')).assets).toEqual([]);
    expect(await chainLength(t, a.id)).toBe(1);
  });

  it('refuses bad input naming the field, and writes nothing', async () => {
    const before = Number((await t.gw.database.db.selectFrom('vault_assets').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...ASSET, name: '' }, 'name'],
      [{ ...ASSET, issued_micro_usd: 0 }, 'issued_micro_usd'],
      [{ ...ASSET, issued_micro_usd: 1.5 }, 'issued_micro_usd'],
      [{ ...ASSET, issued_micro_usd: 2 ** 53 }, 'issued_micro_usd'],
      [{ ...ASSET, asset_class: 'tulips' }, 'asset_class'],
      [{ ...ASSET, owner: 'me' }, 'owner'],
    ];
    for (const [body, field] of cases) {
      const e = await expectApiError(register(issuer.client, body), 400, 'invalid_request');
      expect(e.param, field).toBe(field);
    }
    const after = Number((await t.gw.database.db.selectFrom('vault_assets').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    expect(after).toBe(before);
  });

  it('closes for good: the issuer only, `asset_closed` chained once', async () => {
    const a = await register(issuer.client);
    t.clock.advance(1000);
    const closed = await issuer.client.request<Asset>('POST', `/v1/vault/assets/${a.id}/close`);
    expect(closed).toMatchObject({ state: 'closed', closed_at: t.clock.now().toISOString(), chain_length: 2 });
    const again = await issuer.client.request<Asset>('POST', `/v1/vault/assets/${a.id}/close`);
    expect(again).toMatchObject({ state: 'closed', closed_at: closed.closed_at, chain_length: 2 });
    const c = await publicChain(t, a.id);
    expect(c.events.map((e) => e.type)).toEqual(['asset_registered', 'asset_closed']);
    expectChainRecomputes(c);
  });

  it('serves the public chain content-free and its anchor batch; both recompute, and the root is anchored on anvil', async () => {
    const a = await register(issuer.client);
    await issuer.client.request('POST', `/v1/vault/assets/${a.id}/close`);
    const c = await publicChain(t, a.id);
    expectChainRecomputes(c);
    const text = JSON.stringify(c);
    for (const v of ['Harbour', 'warehouses', '1000000000', issuer.accountId]) expect(text).not.toContain(v);

    await t.gw.leader.runAllOnce(); // gathers the batch and sends the transaction
    await chain.mine(1);
    await t.gw.leader.runAllOnce(); // sees it confirmed
    const batch = await t.client.request<AnchorBatch>('GET', `/v1/vault/anchors/${a.id}`, { credential: null });
    expect(batch.event_hashes).toEqual(c.events.map((e) => e.hash));
    expect(batch.event_count).toBe(2);
    expect(hex(mth(batch.event_hashes.map(buf)))).toBe(batch.root);
    expect(batch.anchor.state).toBe('anchored');
    const path = rootFromPath(buf(batch.root), batch.anchor.leaf_index!, batch.anchor.tree_size!, batch.anchor.proof.map(buf));
    expect(path && hex(path)).toBe(batch.anchor.root);
    const onAnvil = batch.anchor.anchors.find((x) => x.backend === 'anvil')!;
    expect(onAnvil.state).toBe('anchored');
    const tx = await chain.pub.getTransaction({ hash: onAnvil.tx_hash as Hex });
    expect(tx.input).toBe(`0x7376636101${batch.anchor.root!.slice(2)}`);
    const doc = (await (await fetch(batch.anchor_document_url!)).json()) as { leaves: string[] };
    expect(doc.leaves).toContain(batch.root);
  });

  it('answers 404 for the chain and anchors of an unknown id', async () => {
    await expectApiError(t.client.request('GET', '/v1/vault/chain/vast_nope', { credential: null }), 404, 'not_found');
    await expectApiError(t.client.request('GET', '/v1/vault/anchors/vast_nope', { credential: null }), 404, 'not_found');
  });
});
