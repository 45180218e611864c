import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { SvcClient } from '@svc/shared/client';
import { RECEIPT_HEADERS } from '@svc/shared';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';

const PRICE = 1_000;
const TREASURY = '0x1111111111111111111111111111111111111111';
const USDT = '0x2222222222222222222222222222222222222222';
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({
    env: {
      SVC_BILLING_ENFORCED: 'true',
      SVC_TREASURY_ADDRESS: TREASURY,
      SVC_USDT_CONTRACT: USDT,
      SVC_NOTARY_PRICE_MICRO_USD: String(PRICE),
      SVC_BREAKER_LIMIT_MICRO_USD: '50000',
      SVC_BREAKER_WINDOW_SECONDS: '60',
      SVC_HOLD_TTL_SECONDS: '60',
    },
  });
});
afterAll(async () => t?.close());

const digest = (n: number) => n.toString(16).padStart(64, '0');
const asKey = (secret: string) => new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: secret } });
const notarize = (c: SvcClient, n = 1, headers: Record<string, string> = {}) =>
  c.raw('POST', '/v1/notary/receipts', { body: { input_sha256: digest(n), output_sha256: digest(n + 1) }, headers });

async function fundedAccount(micro: number) {
  const s = await t.signIn();
  if (micro > 0) await t.gw.services.metering.credit(s.accountId, micro, 'grant', `test-${s.accountId}`);
  const key = await s.client.createKey();
  return { ...s, key, api: asKey(key.key) };
}

async function ledgerSum(accountId: string) {
  const db = t.gw.database.db;
  const sum = await db.selectFrom('ledger_entries').select((eb) => eb.fn.sum<number>('amount_micro_usd').as('s')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  const pos = await db.selectFrom('credit_accounts').selectAll().where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return { ledger: Number(sum.s ?? 0), balance: pos.balance_micro_usd, held: pos.held_micro_usd };
}

describe('holds never overspend', () => {
  it('with credit for 10 requests, 100 parallel requests get exactly 10 through', async () => {
    const a = await fundedAccount(10 * PRICE);
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => notarize(a.api, i)));
    const codes = results.map((r) => r.status);
    expect(codes.filter((c) => c === 201)).toHaveLength(10);
    expect(codes.filter((c) => c === 402)).toHaveLength(90);
    const s = await ledgerSum(a.accountId);
    expect(s).toEqual({ ledger: 0, balance: 0, held: 0 });
    const events = await t.gw.database.db.selectFrom('usage_events').select('id').where('account_id', '=', a.accountId).execute();
    expect(events).toHaveLength(10);
  });

  it('402 insufficient_credit carries x402 version 1 terms', async () => {
    const a = await fundedAccount(PRICE - 1);
    const res = await notarize(a.api);
    expect(res.status).toBe(402);
    const body = (await res.json()) as { error: Record<string, any> };
    expect(body.error.type).toBe('insufficient_credit');
    expect(body.error.x402Version).toBe(1);
    expect(body.error.accepts).toHaveLength(1);
    expect(body.error.accepts[0]).toEqual({
      scheme: 'exact',
      network: 'base',
      maxAmountRequired: '1',
      resource: `${t.url}/v1/notary/receipts`,
      description: expect.any(String),
      mimeType: 'application/json',
      payTo: TREASURY,
      asset: USDT,
      maxTimeoutSeconds: expect.any(Number),
      extra: expect.objectContaining({ decimals: 6 }),
    });
    expect(await ledgerSum(a.accountId)).toEqual({ ledger: PRICE - 1, balance: PRICE - 1, held: 0 });
  });
});

describe('spend caps and the circuit breaker', () => {
  it("a delegated key's spend counts against every ancestor's cap; the 402 has its own type and no terms", async () => {
    const a = await fundedAccount(100 * PRICE);
    const parent = await a.client.createKey({ spend_cap_micro_usd: 3 * PRICE });
    const child = await asKey(parent.key).delegateKey({ spend_cap_micro_usd: 3 * PRICE });
    expect((await notarize(asKey(child.key), 1)).status).toBe(201);
    expect((await notarize(asKey(parent.key), 2)).status).toBe(201);
    expect((await notarize(asKey(child.key), 3)).status).toBe(201);
    const res = await notarize(asKey(child.key), 4);
    expect(res.status).toBe(402);
    const body = (await res.json()) as { error: Record<string, unknown> };
    expect(body.error.type).toBe('spend_cap_reached');
    expect(body.error).not.toHaveProperty('accepts');
    expect((await notarize(asKey(parent.key), 5)).status).toBe(402);
    const keys = await a.client.listKeys();
    expect(keys.find((k) => k.id === parent.id)?.subtree_spent_micro_usd).toBe(3 * PRICE);
  });

  it('trips on spend rate, freezes the key (402 circuit_breaker_tripped, no terms) until its owner unfreezes it', async () => {
    const a = await fundedAccount(1_000 * PRICE);
    // limit 50_000 per 60 s = 50 requests at PRICE
    for (let i = 0; i < 50; i++) expect((await notarize(a.api, i)).status).toBe(201);
    const tripped = await notarize(a.api, 99);
    expect(tripped.status).toBe(402);
    const body = (await tripped.json()) as { error: Record<string, unknown> };
    expect(body.error.type).toBe('circuit_breaker_tripped');
    expect(body.error).not.toHaveProperty('accepts');
    // Frozen now: even after the window passes, until unfrozen.
    t.clock.advance(61_000);
    const still = await notarize(a.api, 100);
    expect(((await still.json()) as { error: { type: string } }).error.type).toBe('circuit_breaker_tripped');
    const k = (await a.client.listKeys()).find((x) => x.id === a.key.id)!;
    expect(k.status).toBe('frozen');
    expect(k.frozen_reason).toMatch(/circuit breaker/);
    await a.client.unfreezeKey(a.key.id);
    expect((await notarize(a.api, 101)).status).toBe(201);
  });
});

describe('receipts', () => {
  it('every billable response carries a receipt that another library verifies', async () => {
    const a = await fundedAccount(10 * PRICE);
    const res = await notarize(a.api, 7);
    expect(res.status).toBe(201);
    const canonical = Buffer.from(res.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
    const signature = res.headers.get(RECEIPT_HEADERS.signature)!;
    const signer = res.headers.get(RECEIPT_HEADERS.signer)!;
    expect(verifyMessage(canonical, signature)).toBe(signer);
    expect(signer).toBe(t.gw.services.signer.address);
    const payload = JSON.parse(canonical);
    expect(payload).toMatchObject({ v: 1, kind: 'notary', account_id: a.accountId, key_id: a.key.id, cost_micro_usd: PRICE, id: res.headers.get('x-request-id') });
    expect(payload.detail).toEqual({ input_sha256: digest(7), output_sha256: digest(8), label: null });
    expect(res.headers.get(RECEIPT_HEADERS.cost)).toBe(String(PRICE));
  });
});

describe('billing not enforced', () => {
  it('meters and receipts but never refuses for credit', async () => {
    const u = await startTestGateway({ env: { SVC_NOTARY_PRICE_MICRO_USD: String(PRICE) } });
    try {
      const s = await u.signIn();
      const k = await s.client.createKey();
      const api = new SvcClient({ baseUrl: u.url, credential: { kind: 'key', token: k.key } });
      const res = await api.raw('POST', '/v1/notary/receipts', { body: { input_sha256: digest(1), output_sha256: digest(2) } });
      expect(res.status).toBe(201);
      expect(res.headers.get(RECEIPT_HEADERS.signature)).toMatch(/^0x[0-9a-f]{130}$/);
      const pos = await u.gw.services.metering.position(s.accountId);
      expect(pos).toEqual({ balance_micro_usd: -PRICE, held_micro_usd: 0, leased_micro_usd: expect.any(Number), spendable_micro_usd: -PRICE, billing_enforced: false });
    } finally {
      await u.close();
    }
  });
});

describe('holds expire', () => {
  it('a hold whose process died is released at expiry; balance still equals the ledger', async () => {
    const a = await fundedAccount(5 * PRICE);
    const principal = await t.gw.services.keys.authenticate(a.key.key);
    // A request held its credit, then its process died before settling.
    await t.gw.services.metering.hold({ principal, requestId: 'req_died', runId: null, maxCostMicroUsd: 2 * PRICE, route: 'test', resource: 'test' });
    expect((await t.gw.services.metering.position(a.accountId)).spendable_micro_usd).toBe(3 * PRICE);
    t.clock.advance(61_000);
    expect(await t.gw.leader.runAllOnce()).toBe(true);
    const s = await ledgerSum(a.accountId);
    expect(s).toEqual({ ledger: 5 * PRICE, balance: 5 * PRICE, held: 0 });
    // Open holds only live in the holds table; the expired one is gone.
    expect(await t.gw.database.db.selectFrom('holds').selectAll().where('request_id', '=', 'req_died').execute()).toEqual([]);
  });
});

describe('admin metrics', () => {
  it('report billing_enforced, spend by window and events by kind', async () => {
    const a = await fundedAccount(10 * PRICE);
    await notarize(a.api, 1);
    const admin = new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: 'test-admin-token-0123456789' } });
    const m = await admin.request<any>('GET', '/v1/admin/metrics');
    expect(m.billing_enforced).toBe(true);
    expect(m.spend_by_window['24h'].events).toBeGreaterThan(0);
    expect(m.spend_by_window['24h'].cost_micro_usd).toBe(m.spend_by_window['24h'].events * PRICE);
    expect(m.events_by_kind_30d).toEqual([{ kind: 'notary', events: expect.any(Number), cost_micro_usd: expect.any(Number) }]);
  });
});

describe('notary', () => {
  it('lists and fetches registrations; a retry mints and bills again (no Idempotency-Key)', async () => {
    const a = await fundedAccount(10 * PRICE);
    const headers = { 'idempotency-key': 'same-key' };
    const r1 = await notarize(a.api, 42, headers);
    t.clock.advance(1);
    const r2 = await notarize(a.api, 42, headers);
    expect([r1.status, r2.status]).toEqual([201, 201]);
    const b1 = (await r1.json()) as { id: string; input_sha256: string; anchor: { state: string } };
    const b2 = (await r2.json()) as { id: string };
    expect(b1.id).not.toBe(b2.id);
    expect(b1.input_sha256).toBe(digest(42));
    expect(b1.anchor.state).toBe('not_anchored');
    expect((await t.gw.services.metering.position(a.accountId)).balance_micro_usd).toBe(8 * PRICE);
    const list = await a.api.request<{ receipts: Array<{ id: string }> }>('GET', '/v1/notary/receipts');
    expect(list.receipts.map((r) => r.id)).toEqual([b2.id, b1.id]);
    const one = await a.api.request<{ id: string; receipt: { signature: string } }>('GET', `/v1/notary/receipts/${b1.id}`);
    expect(one.id).toBe(b1.id);
    const other = await fundedAccount(0);
    await expectApiError(other.api.request('GET', `/v1/notary/receipts/${b1.id}`), 404, 'not_found');
    const bad = await a.api.raw('POST', '/v1/notary/receipts', { body: { input_sha256: 'nope', output_sha256: digest(1) } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('input_sha256');
    expect((await t.gw.services.metering.position(a.accountId)).balance_micro_usd).toBe(8 * PRICE);
  });
});
