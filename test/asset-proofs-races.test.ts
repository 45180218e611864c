import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call } from './support/call.ts';

/**
 * Signed records under concurrency (meaningful on the Postgres server, where transactions overlap):
 * concurrent attestation and NAV refreshes of one asset number their versions one at a time (the account lock,
 * the asset's row lock), and concurrent benchmark submissions that bring a cohort to k make exactly one
 * release (the cohort's advisory lock), which the others then reuse.
 */

let chain: TestChain;
let token: TestToken;
let t: TestGateway;

beforeAll(async () => {
  chain = await startChain();
  token = await deployToken(chain, 'Race Dollar', 'RACE');
  t = await startTestGateway({ env: { SVC_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: token.address, decimals: 6, confirmations: 1 }]) } });
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

async function account() {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['proofs'] });
  return { ...s, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}

describe('asset proofs under concurrency', () => {
  it('concurrent attestation refreshes get distinct consecutive versions, each superseding another', async () => {
    const a = await account();
    const first = await call(a.api, 'POST', '/v1/attestations/check', { subject: { chain: 'anvil', address: token.address } });
    expect(first.status).toBe(201);
    const id = encodeURIComponent(first.body.asset_id);
    const all = await Promise.all(Array.from({ length: 4 }, () => call(a.api, 'POST', `/v1/attestations/${id}/refresh`, {})));
    expect(all.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(all.map((r) => r.body.version).sort()).toEqual([2, 3, 4, 5]);
    const hist = await call(a.api, 'GET', `/v1/attestations/${id}/history`);
    const versions = hist.body.versions as any[];
    expect(versions.map((v) => v.version)).toEqual([5, 4, 3, 2, 1]);
    versions.slice(0, -1).forEach((v, i) => expect(v.supersedes).toBe(versions[i + 1].id));
  });

  it('concurrent NAV refreshes get distinct consecutive versions', async () => {
    const a = await account();
    const first = await call(a.api, 'POST', '/v1/nav/calculate', { asset_id: 'race-fund', currency: 'USD', holdings: [{ label: 'x', quantity: '2', price: '3' }], shares_outstanding: '1' });
    expect(first.status).toBe(201);
    const all = await Promise.all(Array.from({ length: 4 }, () => call(a.api, 'POST', '/v1/nav/race-fund/refresh', {})));
    expect(all.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(all.map((r) => r.body.version).sort()).toEqual([2, 3, 4, 5]);
  });

  it('concurrent submissions bringing a cohort to k make one release, which the others reuse', async () => {
    const body = (equity: number) => ({ cohort: 'digital-asset-treasuries', holdings: [{ asset_class: 'btc', value: String(equity) }, { asset_class: 'cash', value: String(100 - equity) }] });
    for (const w of [60, 70, 80, 90]) expect((await call((await account()).api, 'POST', '/v1/benchmarks/portfolio', body(w))).status).toBe(201);
    const joiners = await Promise.all([account(), account(), account()]);
    const all = await Promise.all(joiners.map((a, i) => call(a.api, 'POST', '/v1/benchmarks/portfolio', body(50 + i))));
    expect(all.map((r) => r.status)).toEqual([201, 201, 201]);
    expect(all.map((r) => r.body.latest.peers.status)).toEqual(['released', 'released', 'released']);
    expect(new Set(all.map((r) => r.body.latest.peers.release_id)).size).toBe(1);
    const releases = await t.gw.database.db.selectFrom('benchmark_releases').select('id').where('cohort', '=', 'digital-asset-treasuries').execute();
    expect(releases).toHaveLength(1);
  });
});
