import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, type Hex } from 'viem';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { call } from './support/call.ts';

/**
 * Portfolio benchmarks end to end: cohorts with banded counts and anti-leakage parameters; a cohort below
 * k = 5 suppressed; the fifth participant releasing bucketed peer figures with primary and complementary
 * suppression; an attacker differencing two releases (and the 100% total) to recover a suppressed or a single
 * participant's figure, and failing; versions under their methodology; retention destroying the holdings
 * (refresh 409); the confidential tier's 501; bad input refused with nothing written or charged.
 */

const PRICE = 10_000;
const COHORT = 'multi-asset-usd';
let t: TestGateway;
let signer: string;

beforeAll(async () => {
  t = await startTestGateway({ env: { SVC_BENCHMARK_PRICE_MICRO_USD: String(PRICE) } });
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
});
afterAll(async () => t?.close());

type Account = Awaited<ReturnType<typeof account>>;
async function account() {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['proofs'] });
  return { ...s, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}
const balance = async (a: { client: SvcClient }) => (await call(a.client, 'GET', '/v1/billing/balance')).body.balance_micro_usd as number;

/** A portfolio worth 1,000,000 with these percentage weights. */
const portfolio = (weights: Record<string, number>, extra: Record<string, unknown> = {}) => ({
  cohort: COHORT,
  holdings: Object.entries(weights).map(([asset_class, p]) => ({ asset_class, value: String(p * 10_000) })),
  ...extra,
});
async function submit(a: Account, weights: Record<string, number>, extra: Record<string, unknown> = {}) {
  const r = await call(a.api, 'POST', '/v1/benchmarks/portfolio', portfolio(weights, extra));
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}
const figure = (result: any, c: string) => result.peers.figures.find((f: any) => f.asset_class === c);
/** A bucket "25-30%" read as its midpoint, the best an attacker can do with it. */
const mid = (bucket: string) => {
  const [lo, hi] = bucket.replace('%', '').split('-').map(Number);
  return (lo! + hi!) / 2;
};

const PEERS: Array<Record<string, number>> = [
  { equity: 60, fixed_income: 30, cash: 10 },
  { equity: 50, fixed_income: 30, cash: 20 },
  { equity: 70, fixed_income: 20, cash: 10 },
  { equity: 40, fixed_income: 40, cash: 10, digital_assets: 10 },
];

describe('portfolio benchmarks', () => {
  const accounts: Account[] = [];
  const ids: string[] = [];
  let r1: any; // the first release, as the fifth participant saw it

  it('lists cohorts with banded counts, anti-leakage parameters and the guarantees not implemented', async () => {
    const a = await account();
    accounts.push(a);
    const r = await call(a.api, 'GET', '/v1/benchmarks/cohorts');
    expect(r.status).toBe(200);
    expect(r.body.cohorts.map((c: any) => c.id)).toEqual(['multi-asset-usd', 'digital-asset-treasuries']);
    expect(r.body.cohorts[0]).toMatchObject({ participants_band: 'fewer than 5', currency: 'USD', methodology_version: 'svc.benchmark/1' });
    expect(r.body.anti_leakage).toMatchObject({ min_cohort_size: 5, min_cell_holders: 5, weight_bucket_pct: 5 });
    expect(r.body.guarantees_not_implemented.join(' ')).toMatch(/Differential privacy/);
  });

  it('suppresses every peer figure while the cohort is below k; each result signed and metered', async () => {
    for (const [i, w] of PEERS.entries()) {
      const a = accounts[i] ?? (await account());
      if (!accounts[i]) accounts.push(a);
      const before = await balance(a);
      const res = await a.api.raw('POST', '/v1/benchmarks/portfolio', { body: portfolio(w) });
      const b: any = await res.json();
      expect(res.status, JSON.stringify(b)).toBe(201);
      ids.push(b.id);
      expect(Number(res.headers.get('x-svc-cost-micro-usd'))).toBe(PRICE);
      expect(await balance(a)).toBe(before - PRICE);
      expect(b).toMatchObject({ object: 'benchmark', cohort: COHORT, versions: 1, retention: { holdings: 'sealed', destroyed_at: null } });
      expect(b.latest.peers).toEqual({ status: 'suppressed', reason: 'cohort_below_minimum', release_id: null, participants_band: 'fewer than 5', figures: [] });
      expect(b.latest.own.find((o: any) => o.asset_class === 'equity')).toEqual({ asset_class: 'equity', weight_pct: String(w.equity), peer_position: null });
      expect((await recoverMessageAddress({ message: b.latest.record.canonical, signature: b.latest.record.signature as Hex })).toLowerCase()).toBe(signer.toLowerCase());
      expect(b.latest.record.canonical).not.toContain('"value"'); // weights, never the holdings' values
    }
    expect((await call(accounts[0]!.api, 'GET', '/v1/benchmarks/cohorts')).body.cohorts[0].participants_band).toBe('fewer than 5');
  });

  it('releases bucketed figures at k participants, with primary and complementary suppression the 100% total cannot undo', async () => {
    const fifth = await account();
    accounts.push(fifth);
    const b = await submit(fifth, { equity: 55, fixed_income: 25, cash: 20 });
    r1 = b.latest;
    expect(r1.peers).toMatchObject({ status: 'released', reason: null, participants_band: '5-9' });
    expect(r1.peers.release_id).toMatch(/^bmr_/);
    expect(figure(r1, 'equity')).toEqual({ asset_class: 'equity', status: 'released', mean_weight_bucket: '55-60%', holders_band: '5-9' });
    expect(figure(r1, 'fixed_income')).toEqual({ asset_class: 'fixed_income', status: 'released', mean_weight_bucket: '25-30%', holders_band: '5-9' });
    // digital_assets: one holder (primary); cash: the smallest mean held by all five (complementary).
    expect(figure(r1, 'digital_assets')).toEqual({ asset_class: 'digital_assets', status: 'suppressed', mean_weight_bucket: null, holders_band: null });
    expect(figure(r1, 'cash')).toEqual({ asset_class: 'cash', status: 'suppressed', mean_weight_bucket: null, holders_band: null });
    expect(figure(r1, 'commodities')).toEqual({ asset_class: 'commodities', status: 'released', mean_weight_bucket: '0-5%', holders_band: 'none' });
    expect(b.latest.own.find((o: any) => o.asset_class === 'equity').peer_position).toBe('within');
    expect(b.latest.own.find((o: any) => o.asset_class === 'fixed_income').peer_position).toBe('within'); // 25 sits in 25-30%
    expect(b.latest.own.find((o: any) => o.asset_class === 'cash')).toEqual({ asset_class: 'cash', weight_pct: '20', peer_position: null });
    expect(b.latest.own.find((o: any) => o.asset_class === 'commodities').peer_position).toBe('within');

    // The attack on the total: the released means bound only the sum of the two suppressed cells.
    const released = r1.peers.figures.filter((f: any) => f.status === 'released' && f.holders_band !== 'none'); // a class nobody holds is 0
    const lo = 100 - released.reduce((n: number, f: any) => n + Number(f.mean_weight_bucket.split('-')[1].replace('%', '')), 0);
    const hi = 100 - released.reduce((n: number, f: any) => n + Number(f.mean_weight_bucket.split('-')[0]), 0);
    expect([lo, hi]).toEqual([10, 20]);
    // Two assignments agree with everything released, the true one (cash 14, digital_assets 2) and its opposite:
    // the total leaves digital_assets anywhere from 0 to 20, so the one holder's weight is not recovered.
    for (const [cash, digital] of [[14, 2], [2, 14]]) {
      expect(cash! + digital!).toBeGreaterThan(lo);
      expect(cash! + digital!).toBeLessThanOrEqual(hi);
    }
  });

  it('an attacker differencing two releases never isolates one participant', async () => {
    const attacker = accounts[0]!;
    // The target joins with an extreme allocation the attacker wants to learn.
    const target = await account();
    const tb = await submit(target, { fixed_income: 100 });
    // One participant changed since the release: the same release is served, figure for figure.
    expect(tb.latest.peers.release_id).toBe(r1.peers.release_id);
    const again = await call(attacker.api, 'POST', `/v1/benchmarks/${ids[0]}/refresh`, {});
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    const r1b = again.body.latest;
    expect(r1b.peers).toEqual(r1.peers);
    // Differencing: 6 x mean(after) - 5 x mean(before) would be the target's weight, were the figures recomputed.
    const guess = 6 * mid(figure(r1b, 'fixed_income').mean_weight_bucket) - 5 * mid(figure(r1, 'fixed_income').mean_weight_bucket);
    expect(Math.abs(guess - 100)).toBeGreaterThan(50);

    // Four more join: five changes since the first release, so a new one is made over ten participants.
    const late = [{ equity: 65, fixed_income: 25, cash: 10 }, { equity: 45, fixed_income: 35, cash: 20 }, { equity: 60, fixed_income: 30, cash: 10 }];
    for (const w of late) await submit(await account(), w);
    const tenth = await submit(await account(), { equity: 50, fixed_income: 40, cash: 10 });
    const r2 = tenth.latest;
    expect(r2.peers.release_id).not.toBe(r1.peers.release_id);
    expect(r2.peers.participants_band).toBe('10-24');
    // The difference of the two releases is the mean of the five newcomers, never the target's own weight.
    const newcomers = (10 * mid(figure(r2, 'fixed_income').mean_weight_bucket) - 5 * mid(figure(r1, 'fixed_income').mean_weight_bucket)) / 5;
    expect(Math.abs(newcomers - 100)).toBeGreaterThan(30);
    // digital_assets is still held by one participant: suppressed in every release.
    expect(figure(r2, 'digital_assets').status).toBe('suppressed');
    for (const r of [r1, r1b, r2]) expect(JSON.stringify(r.peers)).not.toMatch(/"participants":|"members"/);
  });

  it('keeps every version under its methodology; another tenant sees 404', async () => {
    const a = accounts[1]!;
    const first = await submit(a, PEERS[1]!);
    const refreshed = await call(a.api, 'POST', `/v1/benchmarks/${first.id}/refresh`, {});
    expect(refreshed.status).toBe(201);
    expect(refreshed.body).toMatchObject({ id: first.id, versions: 2, latest: { version: 2, methodology_version: 'svc.benchmark/1' } });
    const hist = await call(a.api, 'GET', `/v1/benchmarks/${first.id}/history`);
    expect(hist.body.results.map((r: any) => [r.version, r.methodology_version])).toEqual([
      [2, 'svc.benchmark/1'],
      [1, 'svc.benchmark/1'],
    ]);
    expect(hist.body.results[1].record.canonical).toBe(first.latest.record.canonical);
    const got = await call(a.api, 'GET', `/v1/benchmarks/${first.id}`);
    expect(got.body).toMatchObject({ versions: 2, latest: { version: 2 } });
    const other = accounts[2]!;
    for (const [m, p] of [['GET', ''], ['GET', '/history'], ['POST', '/refresh']] as const) {
      const r = await call(other.api, m, `/v1/benchmarks/${first.id}${p}`, m === 'POST' ? {} : undefined);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.body.error.type).toBe('not_found');
    }
  });

  it('destroys the holdings at retention: the position says so, refresh answers 409, results stay', async () => {
    const a = await account();
    const retain = new Date(t.clock.now().getTime() + 3600_000).toISOString();
    const b = await submit(a, { equity: 80, cash: 20 }, { retain_until: retain });
    expect(b.retention).toMatchObject({ retain_until: retain, holdings: 'sealed', seconds_remaining: 3600 });
    t.clock.advance(3600_000 + 1000);
    await t.gw.leader.runAllOnce();
    const row = await t.gw.database.db.selectFrom('benchmarks').selectAll().where('id', '=', b.id).executeTakeFirstOrThrow();
    expect(row.holdings_sealed).toBeNull();
    const got = await call(a.api, 'GET', `/v1/benchmarks/${b.id}`);
    expect(got.body.retention).toMatchObject({ holdings: 'destroyed', seconds_remaining: 0 });
    expect(got.body.retention.destroyed_at).not.toBeNull();
    const before = await balance(a);
    const r = await call(a.api, 'POST', `/v1/benchmarks/${b.id}/refresh`, {});
    expect(r.status).toBe(409);
    expect(r.body.error).toMatchObject({ type: 'conflict', reason: 'holdings_destroyed' });
    expect(await balance(a)).toBe(before);
    expect((await call(a.api, 'GET', `/v1/benchmarks/${b.id}/history`)).body.results).toHaveLength(1);
  });

  it('answers 501 for the confidential tier and 400 naming the field for bad input: nothing written, nothing charged', async () => {
    const a = await account();
    const before = await balance(a);
    const conf = await call(a.api, 'POST', '/v1/benchmarks/portfolio', portfolio({ equity: 100 }, { privacy_tier: 'confidential' }));
    expect(conf.status).toBe(501);
    expect(conf.body.error.type).toBe('not_implemented');
    const past = new Date(t.clock.now().getTime() - 1000).toISOString();
    const cases: Array<[unknown, string]> = [
      [{ ...portfolio({ equity: 100 }), cohort: 'no-such-cohort' }, 'cohort'],
      [portfolio({ tulips: 100 }), 'holdings[0].asset_class'],
      [portfolio({ equity: 100 }, { retain_until: past }), 'retain_until'],
      [portfolio({ equity: 100 }, { currency: 'EUR' }), 'currency'],
      [portfolio({ equity: 0 }), 'holdings'],
      [{ ...portfolio({}), holdings: [{ asset_class: 'equity', value: '-5' }] }, 'holdings[0].value'],
      [portfolio({ equity: 100 }, { privacy_tier: 'secret' }), 'privacy_tier'],
    ];
    for (const [body, param] of cases) {
      const r = await call(a.api, 'POST', '/v1/benchmarks/portfolio', body);
      expect(r.status, `${param}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request', param });
    }
    expect(await balance(a)).toBe(before);
    expect(await t.gw.database.db.selectFrom('benchmarks').select('id').where('account_id', '=', a.accountId).execute()).toEqual([]);
  });
});
