import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, type Hex } from 'viem';
import { SvcClient } from '@svc/shared/client';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { call } from './support/call.ts';

/**
 * Private NAV end to end: a book with declared and HTTPS prices computed exactly, signed and metered, the
 * book sealed and never shown; the public reads answering one uniform 404 until a version is published, then
 * the record, history and evidence references; UNAVAILABLE with no figures when an input is missing; a
 * refresh after the clock moved past freshness (STALE) and one taking the share count from a token's supply
 * on anvil; bad input refused with nothing written or charged.
 */

const PRICE = 10_000;
let chain: TestChain;
let token: TestToken;
let t: TestGateway;
let prices: Server;
let priceUrl: string;
let quote = '100.10';
let signer: string;

beforeAll(async () => {
  chain = await startChain();
  token = await deployToken(chain, 'Fund Share', 'FUND');
  await token.mint(chain.accounts[1]!.address, 1_005_000_000n); // 1005 shares of 6 decimals
  prices = createServer((req, res) => {
    if (req.url === '/quote.json') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: { price: quote } }));
    else res.writeHead(500).end();
  });
  const port = await freePort();
  await new Promise<void>((r) => prices.listen(port, '127.0.0.1', r));
  priceUrl = `http://127.0.0.1:${port}/quote.json`;
  t = await startTestGateway({
    env: {
      SVC_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: token.address, decimals: 6, confirmations: 1 }]),
      SVC_NAV_PRICE_MICRO_USD: String(PRICE),
      SVC_NAV_FRESHNESS_SECONDS: '3600',
    },
  });
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
});
afterAll(async () => {
  await t?.close();
  prices?.closeAllConnections();
  prices?.close();
  await chain?.stop();
});

async function account() {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['proofs'] });
  return { ...s, keyId: key.id, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}
const balance = async (a: { client: SvcClient }) => (await call(a.client, 'GET', '/v1/billing/balance')).body.balance_micro_usd as number;
const sha256 = (b: Buffer | string) => `0x${createHash('sha256').update(b).digest('hex')}`;
const anon = () => new SvcClient({ baseUrl: t.url });
const strip = (x: any) => ({ ...x, error: { ...x.error, request_id: undefined } });

const BOOK = {
  asset_id: 'fund-alpha',
  currency: 'USD',
  holdings: [
    { label: 'Secret Holding AAPL', quantity: '0.1', price: '0.2' },
    { label: 'Private Note 7', quantity: '1000000', price: '12.345678', currency: 'USD' },
    { label: 'Listed ETF', quantity: '3', price_source: { url: '', json_pointer: '/data/price', label: 'ETF quote' } },
  ],
  cash: [{ label: 'Operating account', amount: '0.3' }],
  liabilities: [{ label: 'Management fee accrued', amount: '1000.01' }],
  shares_outstanding: '7',
};

describe('private NAV', () => {
  let a: Awaited<ReturnType<typeof account>>;
  let v1: any;

  it('calculates a book exactly, signs it, meters it, and keeps the book sealed', async () => {
    a = await account();
    const before = await balance(a);
    const body = { ...BOOK, holdings: BOOK.holdings.map((h) => ('price_source' in h ? { ...h, price_source: { ...h.price_source, url: priceUrl } } : h)) };
    const res = await a.api.raw('POST', '/v1/nav/calculate', { body });
    v1 = await res.json();
    expect(res.status, JSON.stringify(v1)).toBe(201);
    expect(v1).toMatchObject({ object: 'nav_record', asset_id: 'fund-alpha', version: 1, status: 'VERIFIED', status_at_calculation: 'VERIFIED', currency: 'USD', missing: [], published: false, supersedes: null });
    // 0.1 x 0.2 + 1000000 x 12.345678 + 3 x 100.10 + 0.3 - 1000.01, over 7 shares, rounded half to even at 8 places.
    expect(v1.figures).toEqual({ gross_assets: '12345978.32', cash: '0.3', liabilities: '1000.01', net_asset_value: '12344978.61', shares_outstanding: '7', nav_per_share: '1763568.37285714' });
    expect(Number(res.headers.get('x-svc-cost-micro-usd'))).toBe(PRICE);
    expect(await balance(a)).toBe(before - PRICE);
    expect((await recoverMessageAddress({ message: v1.record.canonical, signature: v1.record.signature as Hex })).toLowerCase()).toBe(signer.toLowerCase());
    expect(v1.record.sha256).toBe(sha256(v1.record.canonical));

    // Evidence: the book and declared prices as salted references, the HTTPS price as the sha256 of its bytes.
    expect(v1.evidence.map((e: any) => [e.input, e.source_kind, e.salted])).toEqual([
      ['book', 'book', true],
      ['holdings[0].price', 'declared', true],
      ['holdings[1].price', 'declared', true],
      ['holdings[2].price', 'https', false],
    ]);
    expect(v1.evidence[3]).toMatchObject({ label: 'ETF quote', sha256: sha256(JSON.stringify({ data: { price: '100.10' } })) });
    // The book is never in the record, and sealed at rest.
    for (const secret of ['Secret Holding AAPL', 'Private Note 7', 'Operating account', '12.345678', '1000000', priceUrl]) {
      expect(v1.record.canonical).not.toContain(secret);
      expect(JSON.stringify(v1)).not.toContain(secret);
    }
    const row = await t.gw.database.db.selectFrom('nav_records').selectAll().where('id', '=', v1.nav_id).executeTakeFirstOrThrow();
    expect(Buffer.from(row.book_sealed).toString('latin1')).not.toContain('Secret Holding');
  });

  it('answers the same 404 for a missing asset, one never calculated and one unpublished, on every public read', async () => {
    const c = anon();
    const answers = [];
    for (const id of ['fund-alpha', 'never-calculated', 'x'.repeat(40)]) {
      for (const suffix of ['', '/history', '/evidence']) {
        const r = await call(c, 'GET', `/v1/nav/${id}${suffix}`);
        expect(r.status, `${id}${suffix}`).toBe(404);
        answers.push(strip(r.body));
      }
    }
    expect(new Set(answers.map((x) => JSON.stringify(x))).size).toBe(1);
    expect((await call(c, 'GET', `/v1/nav/fund-alpha?nav_id=${v1.nav_id}`)).status).toBe(404);
  });

  it('publishes (free, idempotent); anyone then reads the signed record, history and evidence references', async () => {
    const before = await balance(a);
    const p1 = await call(a.api, 'POST', '/v1/nav/fund-alpha/publish', {});
    expect(p1.status, JSON.stringify(p1.body)).toBe(200);
    expect(p1.body).toMatchObject({ nav_id: v1.nav_id, published: true });
    t.clock.advance(5_000);
    const p2 = await call(a.api, 'POST', '/v1/nav/fund-alpha/publish', { nav_id: v1.nav_id });
    expect(p2.body.published_at).toBe(p1.body.published_at);
    expect(await balance(a)).toBe(before);

    const c = anon();
    const pub = await call(c, 'GET', '/v1/nav/fund-alpha');
    expect(pub.status).toBe(200);
    expect(pub.body).toMatchObject({ nav_id: v1.nav_id, status: 'VERIFIED', figures: v1.figures, record: { canonical: v1.record.canonical, signature: v1.record.signature } });
    expect(pub.body.receipt_id).toBeUndefined();
    expect((await call(c, 'GET', `/v1/nav/fund-alpha?nav_id=${v1.nav_id}`)).body.nav_id).toBe(v1.nav_id);
    const hist = await call(c, 'GET', '/v1/nav/fund-alpha/history');
    expect(Object.keys(hist.body).sort()).toEqual(['asset_id', 'note', 'records']);
    expect(hist.body.records.map((r: any) => r.version)).toEqual([1]);
    expect((await call(c, 'GET', '/v1/nav/fund-alpha/history?limit=0')).status).toBe(400);
    expect((await call(c, 'GET', '/v1/nav/fund-alpha/history?limit=201')).status).toBe(400);
    const ev = await call(c, 'GET', '/v1/nav/fund-alpha/evidence');
    expect(ev.body).toMatchObject({ object: 'nav_record.evidence', nav_id: v1.nav_id, evidence: v1.evidence });
    expect(JSON.stringify(ev.body)).not.toContain('Secret Holding');
    // Another account cannot take the id, publish it or refresh it.
    const b = await account();
    const taken = await call(b.api, 'POST', '/v1/nav/calculate', { ...BOOK, holdings: [BOOK.holdings[0]] });
    expect(taken.status).toBe(409);
    expect(taken.body.error).toMatchObject({ type: 'conflict', param: 'asset_id' });
    expect((await call(b.api, 'POST', '/v1/nav/fund-alpha/publish', {})).status).toBe(404);
    expect((await call(b.api, 'POST', '/v1/nav/fund-alpha/refresh', {})).status).toBe(404);
  });

  it('refreshes against the current clock: declared prices past the freshness window make the new version STALE', async () => {
    quote = '101.00';
    t.clock.advance(3600_000 + 1_000);
    // The published version reads STALE now; status_at_calculation keeps VERIFIED.
    expect((await call(anon(), 'GET', '/v1/nav/fund-alpha')).body).toMatchObject({ status: 'STALE', status_at_calculation: 'VERIFIED' });
    const r = await call(a.api, 'POST', '/v1/nav/fund-alpha/refresh', {});
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toMatchObject({ version: 2, status: 'STALE', status_at_calculation: 'STALE', supersedes: v1.nav_id, published: false });
    expect(JSON.parse(r.body.record.canonical)).toMatchObject({ stale_inputs: ['holdings[0].price', 'holdings[1].price'], previous_sha256: v1.record.sha256 });
    expect(r.body.figures.gross_assets).toBe('12345981.02'); // the HTTPS price was read again: 3 x 101.00
    // Unpublished: the public still sees version 1.
    expect((await call(anon(), 'GET', '/v1/nav/fund-alpha')).body.version).toBe(1);
  });

  it('refreshes with a newly observed on-chain supply as the share count', async () => {
    const r = await call(a.api, 'POST', '/v1/nav/fund-alpha/refresh', { supply: { chain: 'anvil', address: token.address } });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.figures).toMatchObject({ shares_outstanding: '1005' });
    expect(r.body.evidence.filter((e: any) => e.source_kind === 'evm_rpc').map((e: any) => e.input)).toEqual(['supply.chain_id', 'supply.chain_head', 'supply.total_supply', 'supply.decimals']);
    expect(r.body.evidence.find((e: any) => e.input === 'supply.total_supply').sha256).toMatch(/^0x[0-9a-f]{64}$/);
    // Published later; it becomes the latest public version.
    await call(a.api, 'POST', '/v1/nav/fund-alpha/publish', { nav_id: r.body.nav_id });
    const hist = await call(anon(), 'GET', '/v1/nav/fund-alpha/history?limit=1');
    expect(hist.body.records.map((x: any) => x.version)).toEqual([3]);
  });

  it('a required input missing gives UNAVAILABLE with no figures (still metered)', async () => {
    const c = await account();
    const before = await balance(c);
    const noPrice = await call(c.api, 'POST', '/v1/nav/calculate', { asset_id: 'fund-gamma', currency: 'EUR', holdings: [{ label: 'a', quantity: '1', price: '2' }, { label: 'b', quantity: '5' }], shares_outstanding: '1' });
    expect(noPrice.status, JSON.stringify(noPrice.body)).toBe(201);
    expect(noPrice.body).toMatchObject({ status: 'UNAVAILABLE', figures: null, missing: ['holdings[1].price'] });
    const down = await call(c.api, 'POST', '/v1/nav/calculate', {
      asset_id: 'fund-delta',
      currency: 'USD',
      holdings: [{ label: 'a', quantity: '1', price_source: { url: `http://127.0.0.1:${await freePort()}/p.json` } }],
    });
    expect(down.body).toMatchObject({ status: 'UNAVAILABLE', figures: null, missing: ['holdings[0].price', 'shares_outstanding'] });
    expect(await balance(c)).toBe(before - 2 * PRICE);
  });

  it('refuses bad input with a 4xx naming the field: nothing written, nothing charged', async () => {
    const c = await account();
    const before = await balance(c);
    const ok = { asset_id: 'fund-epsilon', currency: 'USD', holdings: [{ label: 'a', quantity: '1', price: '2' }], shares_outstanding: '10' };
    const cases: Array<[unknown, string]> = [
      [{ ...ok, shares_outstanding: '-5' }, 'shares_outstanding'],
      [{ ...ok, shares_outstanding: '0' }, 'shares_outstanding'],
      [{ ...ok, holdings: [{ label: 'a', quantity: '1', price: '2', currency: 'EUR' }] }, 'holdings[0].currency'],
      [{ ...ok, liabilities: [{ label: 'l', amount: '1', currency: 'GBP' }] }, 'liabilities[0].currency'],
      [{ ...ok, holdings: [{ label: 'a', quantity: '-1', price: '2' }] }, 'holdings[0].quantity'],
      [{ ...ok, holdings: [{ label: 'a', quantity: '1', price: '2.5e3' }] }, 'holdings[0].price'],
      [{ ...ok, shares_outstanding: undefined, supply: { chain: 'nowhere', address: token.address } }, 'supply.chain'],
      [{ ...ok, holdings: [{ label: 'a', quantity: '1', price: '2', price_as_of: new Date(t.clock.now().getTime() + 86_400_000).toISOString() }] }, 'holdings[0].price_as_of'],
      [{ ...ok, holdings: [{ label: 'a', quantity: '1', price_source: { url: 'ftp://x.example/p' } }] }, 'holdings[0].price_source.url'],
      [{ ...ok, unexpected: 1 }, 'unexpected'],
    ];
    for (const [body, param] of cases) {
      const r = await call(c.api, 'POST', '/v1/nav/calculate', body);
      expect(r.status, `${param}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request', param });
    }
    const noCode = await call(c.api, 'POST', '/v1/nav/calculate', { ...ok, shares_outstanding: undefined, supply: { chain: 'anvil', address: chain.accounts[6]!.address } });
    expect(noCode.status).toBe(400);
    expect(noCode.body.error.param).toBe('supply.address');
    expect(await balance(c)).toBe(before);
    expect(await t.gw.database.db.selectFrom('nav_records').select('id').where('account_id', '=', c.accountId).execute()).toEqual([]);
    expect(await t.gw.database.db.selectFrom('nav_assets').select('asset_id').where('asset_id', '=', 'fund-epsilon').execute()).toEqual([]);
  });
});
