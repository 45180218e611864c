import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import type { SvcClient } from '@svc/shared/client';
import { ConfigError, DEFAULT_PLANS, loadConfig } from '../control-plane/src/config.ts';
import { addMonth } from '../control-plane/src/modules/subscriptions/plans.ts';
import { startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { call } from './support/call.ts';

const TREASURY = '0x1111111111111111111111111111111111111111';
const USDT = '0x2222222222222222222222222222222222222222';
const PLANS = [
  { id: 'free', name: 'Free', monthly_fee_micro_usd: 0, retention_days: 7, limits: { webhooks: 1 }, features: { audit_packs: false } },
  { id: 'basic', name: 'Basic', monthly_fee_micro_usd: 10_000, retention_days: 30, limits: { webhooks: 5 }, features: { audit_packs: false } },
  { id: 'premium', name: 'Premium', monthly_fee_micro_usd: 50_000, retention_days: 365, limits: { webhooks: null }, features: { audit_packs: true } },
];

// Sessions outlive the months the clock moves through.
const ENV = { SVC_PLANS: JSON.stringify(PLANS), SVC_SESSION_TTL_SECONDS: String(10 * 365 * 86400) };
let t: TestGateway;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  t = await startTestGateway({ env: { ...ENV, SVC_BILLING_ENFORCED: 'true', SVC_TREASURY_ADDRESS: TREASURY, SVC_USDT_CONTRACT: USDT } });
});
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
  await t?.close();
});


/** A receiver on loopback that verifies each delivery with `standardwebhooks` at the gateway's clock. */
async function receiver(secret: () => string) {
  const events: any[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      vi.useFakeTimers({ toFake: ['Date'], now: t.clock.now() });
      try {
        events.push(new Webhook(secret()).verify(Buffer.concat(chunks).toString('utf8'), headers));
        res.writeHead(200).end();
      } catch {
        res.writeHead(400).end();
      } finally {
        vi.useRealTimers();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  closers.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/in`, events };
}

async function account(credit: number) {
  const s = await t.signIn();
  if (credit) await t.gw.services.metering.credit(s.accountId, credit, 'grant', `subs-${s.accountId}`);
  let secret = '';
  const rec = await receiver(() => secret);
  const hook = await call(s.client, 'POST', '/v1/webhooks', { url: rec.url });
  secret = hook.body.secret;
  const events = () => rec.events.filter((e) => e.type.startsWith('subscription_'));
  return { ...s, events, all: () => rec.events };
}

async function ledger(accountId: string, g: TestGateway = t) {
  return g.gw.database.db.selectFrom('ledger_entries').select(['amount_micro_usd', 'kind', 'ref', 'balance_after_micro_usd']).where('account_id', '=', accountId).where('kind', '=', 'subscription').orderBy('id').execute();
}
const balance = async (accountId: string) => (await t.gw.services.metering.position(accountId)).balance_micro_usd;

describe('GET /v1/billing/plans', () => {
  it('serves the configured catalog publicly', async () => {
    const r = await call(t.client, 'GET', '/v1/billing/plans');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      currency: 'micro-USD',
      period: 'month',
      plans: PLANS.map((p) => ({ object: 'plan', ...p })),
    });
  });

  it('defaults to Free plus paid plans; refuses a catalog without a free plan, naming SVC_PLANS', () => {
    const def = loadConfig({}).plans;
    expect(def).toEqual(DEFAULT_PLANS);
    expect(def.find((p) => p.id === 'free')?.monthlyFeeMicroUsd).toBe(0);
    expect(def.filter((p) => p.monthlyFeeMicroUsd > 0).length).toBeGreaterThanOrEqual(1);
    for (const p of def) expect(Object.keys(p.features).length).toBeGreaterThan(0);
    for (const bad of [JSON.stringify(PLANS.slice(1)), JSON.stringify([{ ...PLANS[0], monthly_fee_micro_usd: 5 }]), JSON.stringify([PLANS[0], PLANS[0]]), '{nope', JSON.stringify([{ ...PLANS[1], id: 'Bad Id' }, PLANS[0]])]) {
      expect(() => loadConfig({ SVC_PLANS: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ SVC_PLANS: bad })).toThrow(/SVC_PLANS/);
    }
  });
});

describe('subscribing', () => {
  it('a new account is on Free', async () => {
    const s = await t.signIn();
    const r = await call(s.client, 'GET', '/v1/billing/subscription');
    expect(r.body).toEqual({
      object: 'subscription',
      plan: { object: 'plan', ...PLANS[0] },
      period_start: null,
      period_end: null,
      auto_renew: false,
      scheduled_plan: null,
      fee_micro_usd: 0,
      balance_micro_usd: 0,
      held_micro_usd: 0,
      spendable_micro_usd: 0,
    });
    expect((await t.client.raw('GET', '/v1/billing/subscription')).status).toBe(401);
  });

  it('402 insufficient_credit with x402 terms when the fee cannot be covered; nothing is written', async () => {
    const s = await account(30_000);
    const r = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'premium' });
    expect(r.status).toBe(402);
    expect(r.body.error).toMatchObject({ type: 'insufficient_credit', x402Version: 1, plan: 'premium', balance_micro_usd: 30_000, held_micro_usd: 0, required_micro_usd: 50_000 });
    expect(r.body.error.accepts).toEqual([
      expect.objectContaining({ scheme: 'exact', network: 'base', maxAmountRequired: '20000', payTo: TREASURY, asset: USDT, resource: `${t.url}/v1/billing/subscription` }),
    ]);
    expect(await ledger(s.accountId)).toEqual([]);
    expect(await balance(s.accountId)).toBe(30_000);
    expect(await t.gw.database.db.selectFrom('subscriptions').selectAll().where('account_id', '=', s.accountId).execute()).toEqual([]);
    expect((await call(s.client, 'GET', '/v1/billing/subscription')).body.plan.id).toBe('free');
  });

  it('refuses an unknown plan and malformed bodies naming the field', async () => {
    const s = await t.signIn();
    const unknown = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'gold' });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatchObject({ type: 'invalid_request', param: 'plan' });
    expect(unknown.body.error.message).toMatch(/basic/);
    const missing = await call(s.client, 'POST', '/v1/billing/subscription', {});
    expect(missing.status).toBe(400);
    expect(missing.body.error.param).toBe('plan');
    expect((await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic', coupon: 'x' })).status).toBe(400);
  });

  it('a paid plan debits its monthly fee through the ledger, once per period', async () => {
    const s = await account(25_000);
    const start = t.clock.now();
    const r = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      change: 'started',
      charged_micro_usd: 10_000,
      plan: { id: 'basic' },
      period_start: start.toISOString(),
      period_end: addMonth(start).toISOString(),
      auto_renew: true,
      balance_micro_usd: 15_000,
    });
    expect(await ledger(s.accountId)).toEqual([{ amount_micro_usd: -10_000, kind: 'subscription', ref: `subscription:${s.accountId}:basic:${start.toISOString()}`, balance_after_micro_usd: 15_000 }]);
    // Again: no second charge.
    const again = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    expect(again.body).toMatchObject({ change: 'unchanged', charged_micro_usd: 0, balance_micro_usd: 15_000 });
    expect(await ledger(s.accountId)).toHaveLength(1);
  });

  it('a fee that takes the balance below the alert threshold fires balance_low', async () => {
    const s = await account(25_000);
    await call(s.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 20_000 });
    await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    await t.gw.services.alerts.idle();
    await t.gw.leader.runAllOnce();
    expect(s.all().filter((e) => e.type === 'balance_low').map((e) => e.data)).toEqual([{ balance_micro_usd: 15_000, threshold_micro_usd: 20_000 }]);
  });

  it('upgrades at once for the full fee; a cheaper plan waits for the period end', async () => {
    const s = await account(100_000);
    await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    t.clock.advance(86_400_000);
    const upAt = t.clock.now();
    const up = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'premium' });
    expect(up.body).toMatchObject({ change: 'upgraded', charged_micro_usd: 50_000, plan: { id: 'premium' }, period_start: upAt.toISOString(), period_end: addMonth(upAt).toISOString(), balance_micro_usd: 40_000 });
    const down = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    expect(down.body).toMatchObject({ change: 'scheduled', charged_micro_usd: 0, plan: { id: 'premium' }, scheduled_plan: 'basic', auto_renew: true, balance_micro_usd: 40_000 });

    t.clock.set(addMonth(upAt));
    await t.gw.leader.runAllOnce();
    const after = (await call(s.client, 'GET', '/v1/billing/subscription')).body;
    expect(after).toMatchObject({ plan: { id: 'basic' }, scheduled_plan: null, period_start: addMonth(upAt).toISOString(), fee_micro_usd: 10_000, balance_micro_usd: 30_000 });
    expect((await ledger(s.accountId)).map((e) => e.amount_micro_usd)).toEqual([-10_000, -50_000, -10_000]);
  });
});

describe('renewal at period end (leader loop)', () => {
  it('renews exactly once per period, however often the loop runs', async () => {
    const s = await account(35_000);
    const start = t.clock.now();
    await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    const end = addMonth(start);

    t.clock.set(end.getTime() - 1000);
    await t.gw.leader.runAllOnce();
    expect(await ledger(s.accountId)).toHaveLength(1); // not yet

    t.clock.set(end);
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    const entries = await ledger(s.accountId);
    expect(entries).toHaveLength(2);
    expect(entries[1]).toEqual({ amount_micro_usd: -10_000, kind: 'subscription', ref: `subscription:${s.accountId}:basic:${end.toISOString()}`, balance_after_micro_usd: 15_000 });
    const sub = (await call(s.client, 'GET', '/v1/billing/subscription')).body;
    expect(sub).toMatchObject({ plan: { id: 'basic' }, period_start: end.toISOString(), period_end: addMonth(end).toISOString(), auto_renew: true, balance_micro_usd: 15_000 });
    expect(s.events().map((e) => [e.type, e.data.period_start])).toEqual([['subscription_renewed', end.toISOString()]]);

    // Two renewers racing over the same due period (as two processes would): still one debit.
    t.clock.set(addMonth(end));
    const moved = await Promise.all([t.gw.services.subscriptions.renewDue(), t.gw.services.subscriptions.renewDue(), t.gw.services.subscriptions.renewDue()]);
    expect(moved.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
    expect(await ledger(s.accountId)).toHaveLength(3);
    expect(await balance(s.accountId)).toBe(5_000);
    await t.gw.leader.runAllOnce();
    expect(s.events().map((e) => [e.type, e.data.period_start])).toEqual([
      ['subscription_renewed', end.toISOString()],
      ['subscription_renewed', addMonth(end).toISOString()],
    ]);
  });

  it('a renewal that cannot be paid drops to Free and emits subscription_renewal_failed', async () => {
    const s = await account(12_000);
    const start = t.clock.now();
    await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    t.clock.set(addMonth(start));
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect(await ledger(s.accountId)).toHaveLength(1);
    expect(await balance(s.accountId)).toBe(2_000);
    const sub = (await call(s.client, 'GET', '/v1/billing/subscription')).body;
    expect(sub).toMatchObject({ plan: { id: 'free' }, period_end: null, auto_renew: false, fee_micro_usd: 0 });
    expect(s.events().map((e) => e.type)).toEqual(['subscription_renewal_failed']);
    expect(s.events()[0].data).toMatchObject({ plan: 'basic', fee_micro_usd: 10_000, balance_micro_usd: 2_000, spendable_micro_usd: 2_000 });
  });

  it('cancel keeps the plan to the period end, then drops to Free without a charge', async () => {
    const s = await account(50_000);
    const start = t.clock.now();
    await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    const c = await call(s.client, 'POST', '/v1/billing/subscription/cancel');
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ plan: { id: 'basic' }, auto_renew: false, period_end: addMonth(start).toISOString() });
    expect((await call(s.client, 'POST', '/v1/billing/subscription/cancel')).body.auto_renew).toBe(false); // idempotent

    t.clock.set(addMonth(start).getTime() - 1);
    await t.gw.leader.runAllOnce();
    expect((await call(s.client, 'GET', '/v1/billing/subscription')).body.plan.id).toBe('basic');
    t.clock.set(addMonth(start));
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect((await call(s.client, 'GET', '/v1/billing/subscription')).body).toMatchObject({ plan: { id: 'free' }, auto_renew: false, period_end: null, balance_micro_usd: 40_000 });
    expect(await ledger(s.accountId)).toHaveLength(1);
    expect(s.events().map((e) => [e.type, e.data.plan])).toEqual([['subscription_ended', 'basic']]);
  });

  it('resubscribing to the cancelled plan before the period end resumes it without a charge', async () => {
    const s = await account(50_000);
    await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    await call(s.client, 'POST', '/v1/billing/subscription/cancel');
    const r = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
    expect(r.body).toMatchObject({ change: 'resumed', charged_micro_usd: 0, auto_renew: true, balance_micro_usd: 40_000 });
  });
});

describe('a plan is a purchase, also where billing is not enforced', () => {
  it('402 without the credit (balance never negative); a renewal it cannot pay drops to Free', async () => {
    const g = await startTestGateway({ env: ENV }); // SVC_BILLING_ENFORCED unset: the embedded default (off)
    try {
      expect(g.gw.config.billing.enforced).toBe(false);
      const s = await g.signIn();
      const r = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
      expect(r.status).toBe(402);
      expect(r.body.error).toMatchObject({ type: 'insufficient_credit', plan: 'basic', balance_micro_usd: 0, held_micro_usd: 0, required_micro_usd: 10_000 });
      expect(r.body.error).not.toHaveProperty('accepts'); // no treasury configured: no x402 terms to offer
      expect(await ledger(s.accountId, g)).toEqual([]);
      expect((await call(s.client, 'GET', '/v1/billing/subscription')).body).toMatchObject({ plan: { id: 'free' }, balance_micro_usd: 0 });

      await g.gw.services.metering.credit(s.accountId, 15_000, 'grant', `unenforced-${s.accountId}`);
      const start = g.clock.now();
      const ok = await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' });
      expect(ok.body).toMatchObject({ change: 'started', charged_micro_usd: 10_000, balance_micro_usd: 5_000 });
      expect((await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'premium' })).status).toBe(402);
      g.clock.set(addMonth(start));
      await g.gw.leader.runAllOnce();
      expect((await call(s.client, 'GET', '/v1/billing/subscription')).body).toMatchObject({ plan: { id: 'free' }, period_end: null, balance_micro_usd: 5_000 });
      expect((await ledger(s.accountId, g)).map((e) => e.amount_micro_usd)).toEqual([-10_000]);
    } finally {
      await g.close();
    }
  });
});

describe('renewal with several control-plane processes', () => {
  // Postgres only: the embedded database serves one process (test/platform.test.ts checks it always leads).
  it.skipIf(TEST_DB_KIND === 'pglite')('two gateways on one database: the period renews once, on the leader; one fee entry', async () => {
    const { a, b, close } = await startGatewayPair({ env: { ...ENV, SVC_BILLING_ENFORCED: 'true', SVC_TREASURY_ADDRESS: TREASURY, SVC_USDT_CONTRACT: USDT } });
    try {
      expect([a.gw.leader.isLeader, b.gw.leader.isLeader]).toEqual([true, false]);
      const s = await b.signIn(); // either process serves the API
      await a.gw.services.metering.credit(s.accountId, 35_000, 'grant', `pair-${s.accountId}`);
      expect((await call(s.client, 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/never' })).status).toBe(201); // so events are recorded
      const start = a.clock.now();
      expect((await call(s.client, 'POST', '/v1/billing/subscription', { plan: 'basic' })).status).toBe(200);
      const end = addMonth(start);
      const renewed = () => b.gw.database.db.selectFrom('webhook_events').select('data').where('account_id', '=', s.accountId).where('type', '=', 'subscription_renewed').execute();

      a.clock.set(end);
      // Both processes run their loops at the period end; a handover overlap also runs both renewers at once.
      const ran = await Promise.all([
        a.gw.leader.runAllOnce(),
        b.gw.leader.runAllOnce(),
        a.gw.services.subscriptions.renewDue(),
        b.gw.services.subscriptions.renewDue(),
        b.gw.services.subscriptions.renewDue(),
      ]);
      expect(ran.slice(0, 2)).toEqual([true, false]); // only the leader runs its loops
      let entries = await ledger(s.accountId, a);
      expect(entries.map((e) => e.ref)).toEqual([`subscription:${s.accountId}:basic:${start.toISOString()}`, `subscription:${s.accountId}:basic:${end.toISOString()}`]);
      expect(entries[1]).toMatchObject({ amount_micro_usd: -10_000, balance_after_micro_usd: 15_000 });
      expect(await renewed()).toHaveLength(1);

      // The leader stops; the other process takes over and renews the next period, once.
      await a.stop();
      expect(await b.gw.leader.electOnce()).toBe(true);
      await b.gw.leader.runAllOnce();
      expect(await ledger(s.accountId, b)).toHaveLength(2); // nothing was due
      b.clock.set(addMonth(end));
      await Promise.all([b.gw.leader.runAllOnce(), b.gw.leader.runAllOnce()]);
      entries = await ledger(s.accountId, b);
      expect(entries.map((e) => e.amount_micro_usd)).toEqual([-10_000, -10_000, -10_000]);
      expect(entries[2]!.ref).toBe(`subscription:${s.accountId}:basic:${addMonth(end).toISOString()}`);
      expect((await b.gw.services.metering.position(s.accountId)).balance_micro_usd).toBe(5_000);
      expect((await renewed()).map((e) => e.data.period_start)).toEqual([end.toISOString(), addMonth(end).toISOString()]);
    } finally {
      await close();
    }
  });
});

describe('month arithmetic', () => {
  it('clamps to the end of shorter months', () => {
    expect(addMonth(new Date('2026-01-31T10:00:00Z')).toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(addMonth(new Date('2028-01-31T10:00:00Z')).toISOString()).toBe('2028-02-29T10:00:00.000Z');
    expect(addMonth(new Date('2026-12-15T00:00:00Z')).toISOString()).toBe('2027-01-15T00:00:00.000Z');
  });
});
