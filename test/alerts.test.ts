import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { SvcClient } from '@svc/shared/client';
import { startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { call } from './support/call.ts';

const PRICE = 1_000; // notary receipt
const DEFAULT_THRESHOLD = 2_500;

/** A real receiver on loopback that verifies every delivery with `standardwebhooks` at the gateway's clock. */
async function receiver(secret: () => string, now: () => Date) {
  const events: any[] = [];
  const rejected: unknown[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
      vi.useFakeTimers({ toFake: ['Date'], now: now() });
      try {
        events.push(new Webhook(secret()).verify(Buffer.concat(chunks).toString('utf8'), headers));
        res.writeHead(204).end();
      } catch (e) {
        rejected.push(e);
        res.writeHead(400).end();
      } finally {
        vi.useRealTimers();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/in`;
  return { url, events, rejected, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const ENV = { SVC_NOTARY_PRICE_MICRO_USD: String(PRICE), SVC_BALANCE_LOW_DEFAULT_MICRO_USD: String(DEFAULT_THRESHOLD) };
let t: TestGateway;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  t = await startTestGateway({ env: ENV });
});
afterAll(async () => {
  await Promise.all(closers.map((c) => c()));
  await t?.close();
});


let n = 0;
const digest = (i: number) => i.toString(16).padStart(64, '0');
/** Spends PRICE through the real money path (hold, settle) with an API key. */
async function spend(key: string, baseUrl = t.url) {
  n += 2;
  const api = new SvcClient({ baseUrl, credential: { kind: 'key', token: key } });
  const r = await api.raw('POST', '/v1/notary/receipts', { body: { input_sha256: digest(n), output_sha256: digest(n + 1) } });
  expect(r.status).toBe(201);
}

/** An account with credit, an API key, and a verifying receiver subscribed to balance_low. */
async function watched(credit: number) {
  const s = await t.signIn();
  if (credit) await t.gw.services.metering.credit(s.accountId, credit, 'grant', `alerts-${s.accountId}`);
  const key = (await s.client.createKey()).key;
  let secret = '';
  const rec = await receiver(() => secret, () => t.clock.now());
  closers.push(rec.close);
  const hook = await call(s.client, 'POST', '/v1/webhooks', { url: rec.url, events: ['balance_low'] });
  expect(hook.status).toBe(201);
  secret = hook.body.secret;
  /** Lets queued balance observations finish, then runs the leader's loops (delivery). */
  const flush = async () => {
    await t.gw.services.alerts.idle();
    await t.gw.leader.runAllOnce();
  };
  return { ...s, key, rec, flush };
}

describe('GET/PUT /v1/billing/alerts', () => {
  it('defaults to the deployment threshold; sets and clears its own; refuses bad values naming the field', async () => {
    const s = await t.signIn();
    expect((await call(s.client, 'GET', '/v1/billing/alerts')).body).toEqual({
      object: 'billing_alerts',
      balance_low_micro_usd: null,
      default_micro_usd: DEFAULT_THRESHOLD,
      effective_micro_usd: DEFAULT_THRESHOLD,
      armed: false,
      balance_micro_usd: 0,
    });
    const set = await call(s.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 7_000 });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ balance_low_micro_usd: 7_000, effective_micro_usd: 7_000 });
    expect((await call(s.client, 'GET', '/v1/billing/alerts')).body.balance_low_micro_usd).toBe(7_000);

    for (const body of [{ balance_low_micro_usd: -1 }, { balance_low_micro_usd: 1.5 }, { balance_low_micro_usd: '5' }, {}, { balance_low_micro_usd: 5, extra: 1 }]) {
      const r = await call(s.client, 'PUT', '/v1/billing/alerts', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.type).toBe('invalid_request');
      if ('balance_low_micro_usd' in body && !('extra' in body)) expect(r.body.error.param).toBe('balance_low_micro_usd');
    }
    expect((await call(s.client, 'GET', '/v1/billing/alerts')).body.balance_low_micro_usd).toBe(7_000); // unchanged

    const cleared = await call(s.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: null });
    expect(cleared.body).toMatchObject({ balance_low_micro_usd: null, effective_micro_usd: DEFAULT_THRESHOLD });
    expect((await t.client.raw('GET', '/v1/billing/alerts')).status).toBe(401);
  });
});

describe('balance_low', () => {
  it('fires once when a real settle crosses below the threshold, and again only after re-arming', async () => {
    const a = await watched(5 * PRICE); // 5000
    await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 3_500 });
    await spend(a.key); // 4000
    await a.flush();
    expect(a.rec.events).toHaveLength(0);

    await spend(a.key); // 3000 < 3500: crossed
    await a.flush();
    expect(a.rec.rejected).toEqual([]);
    expect(a.rec.events).toHaveLength(1);
    expect(a.rec.events[0]).toMatchObject({ type: 'balance_low', account_id: a.accountId, data: { balance_micro_usd: 3_000, threshold_micro_usd: 3_500 } });
    expect((await call(a.client, 'GET', '/v1/billing/alerts')).body).toMatchObject({ armed: false, balance_micro_usd: 3_000 });

    await spend(a.key); // 2000: still below, no new event
    await a.flush();
    t.clock.advance(3_600_000);
    await a.flush();
    expect(a.rec.events).toHaveLength(1);

    await t.gw.services.metering.credit(a.accountId, 2_000, 'grant', `rearm-${a.accountId}`); // 4000: re-armed
    await a.flush();
    expect(a.rec.events).toHaveLength(1);
    expect((await call(a.client, 'GET', '/v1/billing/alerts')).body.armed).toBe(true);

    await spend(a.key); // 3000: crossed again
    await a.flush();
    expect(a.rec.events).toHaveLength(2);
    expect(a.rec.events[1].data).toEqual({ balance_micro_usd: 3_000, threshold_micro_usd: 3_500 });
    expect(a.rec.events[1].id).not.toBe(a.rec.events[0].id);
  });

  it('uses the deployment default when the account set none', async () => {
    const a = await watched(3 * PRICE); // 3000 >= 2500
    await spend(a.key); // 2000 < 2500
    await a.flush();
    expect(a.rec.events.map((e) => e.data)).toEqual([{ balance_micro_usd: 2_000, threshold_micro_usd: DEFAULT_THRESHOLD }]);
  });

  it('fires nothing when the threshold is raised above the balance; the next crossing after re-arming does', async () => {
    const a = await watched(10 * PRICE);
    const r = await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 20_000 });
    expect(r.body).toMatchObject({ armed: false, balance_micro_usd: 10_000 });
    await spend(a.key); // 9000, below but never crossed
    await a.flush();
    expect(a.rec.events).toHaveLength(0);
    await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 8_500 }); // 9000 >= 8500: armed
    await spend(a.key); // 8000
    await a.flush();
    expect(a.rec.events.map((e) => e.data)).toEqual([{ balance_micro_usd: 8_000, threshold_micro_usd: 8_500 }]);
  });

  it('settles that leave an armed alert above its threshold read nothing; the crossing is still evaluated', async () => {
    const a = await watched(10 * PRICE);
    await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 2 * PRICE });
    await spend(a.key); // 9: this observation reads the alert, armed
    await t.gw.services.alerts.idle();
    const evaluate = vi.spyOn(t.gw.services.alerts, 'evaluate');
    try {
      for (let i = 0; i < 6; i++) await spend(a.key); // 8 .. 3: still above the threshold
      await t.gw.services.alerts.idle();
      expect(evaluate).not.toHaveBeenCalled();
      await spend(a.key);
      await spend(a.key); // 1: crossed
      await t.gw.services.alerts.idle();
      expect(evaluate).toHaveBeenCalledWith(a.accountId, PRICE);
    } finally {
      evaluate.mockRestore();
    }
  });

  it('a failing alert never fails the money path', async () => {
    const a = await watched(5 * PRICE);
    await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 4.5 * PRICE }); // the spend crosses it
    await t.gw.services.alerts.idle();
    const evaluate = vi.spyOn(t.gw.services.alerts, 'evaluate').mockRejectedValue(new Error('boom'));
    try {
      await spend(a.key);
      await t.gw.services.alerts.idle();
      expect(evaluate).toHaveBeenCalledWith(a.accountId, 4 * PRICE);
    } finally {
      evaluate.mockRestore();
    }
    const pos = await t.gw.services.metering.position(a.accountId);
    expect(pos.balance_micro_usd).toBe(4 * PRICE);
  });
});

describe('balance_low decided in the database', () => {
  const lows = (g: TestGateway, accountId: string) =>
    g.gw.database.db.selectFrom('webhook_events').select('data').where('account_id', '=', accountId).where('type', '=', 'balance_low').orderBy('created_at').execute();

  it('a burst of observations for one account costs a couple of evaluations, and the crossing still fires once', async () => {
    const a = await watched(5 * PRICE);
    await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 3_500 });
    await t.gw.services.alerts.idle();
    const alerts = t.gw.services.alerts;
    const evaluate = alerts.evaluate.bind(alerts);
    let runs = 0;
    alerts.evaluate = async (...args) => (runs++, evaluate(...args));
    try {
      // The balance drops to 3000 outside the money path's observer, then 100 settles report it at once.
      await t.gw.database.db.updateTable('credit_accounts').set({ balance_micro_usd: 3_000 }).where('account_id', '=', a.accountId).execute();
      for (let i = 0; i < 100; i++) alerts.observe({ accountId: a.accountId, balanceMicroUsd: 3_000 });
      await alerts.idle();
      expect(runs).toBe(1);
      await a.flush();
      expect(a.rec.events).toHaveLength(1);
      // One running and more arriving: the ones that arrive while it runs queue exactly one more.
      alerts.observe({ accountId: a.accountId, balanceMicroUsd: 3_000 });
      await Promise.resolve();
      await Promise.resolve();
      for (let i = 0; i < 10; i++) alerts.observe({ accountId: a.accountId, balanceMicroUsd: 3_000 });
      await alerts.idle();
      expect(runs).toBe(3);
      await a.flush();
      expect(a.rec.events).toHaveLength(1);
    } finally {
      alerts.evaluate = evaluate;
    }
  });

  it('a stale observation (a higher balance reported late) neither re-arms nor fires: one event per crossing', async () => {
    const a = await watched(5 * PRICE);
    await call(a.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 3_500 });
    await spend(a.key); // 4000
    await spend(a.key); // 3000: crossed
    await a.flush();
    expect(a.rec.events).toHaveLength(1);
    // The 4000 of the first settle, evaluated late (another process, or a slow observer): the balance is 3000.
    expect(await t.gw.services.alerts.evaluate(a.accountId, 4_000)).toBe('unchanged');
    expect((await call(a.client, 'GET', '/v1/billing/alerts')).body.armed).toBe(false);
    await spend(a.key); // 2000: still the same crossing
    await a.flush();
    expect(a.rec.events).toHaveLength(1);

    await t.gw.services.metering.credit(a.accountId, 2_000, 'grant', `stale-${a.accountId}`); // 4000: re-armed
    await a.flush();
    expect(await t.gw.services.alerts.evaluate(a.accountId, 2_000)).toBe('unchanged'); // stale low: no event
    await spend(a.key); // 3000: crossed again
    await a.flush();
    expect(a.rec.events.map((e) => e.data)).toEqual([
      { balance_micro_usd: 3_000, threshold_micro_usd: 3_500 },
      { balance_micro_usd: 3_000, threshold_micro_usd: 3_500 },
    ]);
  });

  // Postgres only: two processes on one database (the embedded database serves one process).
  it.skipIf(TEST_DB_KIND === 'pglite')('two gateways observing concurrently, in any order, enqueue exactly one balance_low per crossing', async () => {
    const { a, b, close } = await startGatewayPair({ env: ENV });
    try {
      const s = await a.signIn();
      await a.gw.services.metering.credit(s.accountId, 4 * PRICE, 'grant', `pair-${s.accountId}`); // 4000
      const key = (await s.client.createKey()).key;
      expect((await call(s.client, 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/never', events: ['balance_low'] })).status).toBe(201);
      await call(s.client, 'PUT', '/v1/billing/alerts', { balance_low_micro_usd: 3_500 });
      // Many observations at once from both processes, stale ones (the other side of the threshold) mixed in.
      const burst = (values: number[]) =>
        Promise.all([a, b].flatMap((g) => [...values, ...values].map((v) => g.gw.services.alerts.evaluate(s.accountId, v))));
      const idle = () => Promise.all([a.gw.services.alerts.idle(), b.gw.services.alerts.idle()]);

      await Promise.all([spend(key, a.url), burst([3_000, 4_000, 3_000, 4_000])]); // 3000: crossed
      await burst([4_000, 3_000, 4_000]);
      await idle();
      expect(await lows(a, s.accountId)).toHaveLength(1);
      expect((await lows(a, s.accountId))[0]!.data).toEqual({ balance_micro_usd: 3_000, threshold_micro_usd: 3_500 });

      await Promise.all([spend(key, b.url), burst([3_000, 2_000, 4_000])]); // 2000: the same crossing
      await a.gw.services.metering.credit(s.accountId, 3_000, 'grant', `pair-rearm-${s.accountId}`); // 5000: re-armed
      expect(await burst([2_000, 5_000, 3_000])).not.toContain('fired');
      await idle();
      expect(await lows(a, s.accountId)).toHaveLength(1);
      expect((await call(s.client, 'GET', '/v1/billing/alerts')).body).toMatchObject({ armed: true, balance_micro_usd: 5_000 });

      await spend(key, b.url); // 4000
      await Promise.all([spend(key, a.url), spend(key, b.url)]); // 2000: crossed again, settled by both processes
      await burst([4_000, 3_000, 2_000]);
      await idle();
      const fired = await lows(a, s.accountId);
      expect(fired).toHaveLength(2);
      // Whichever evaluation won saw the first or both settles committed: 3000 or 2000.
      expect([3_000, 2_000]).toContain(fired[1]!.data.balance_micro_usd);
    } finally {
      await close();
    }
  });
});
