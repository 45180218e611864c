import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import type { SvcClient } from '@svc/shared/client';
import { MAX_ATTEMPTS, RETRY_SCHEDULE_SECONDS } from '../control-plane/src/modules/webhooks/sender.ts';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { call } from './support/call.ts';

/** A real HTTP receiver on loopback: records every POST and answers with `status` (or never, when hanging). */
class Receiver {
  hits: Array<{ headers: Record<string, string>; body: string }> = [];
  status = 200;
  hang = false;
  private server: Server | undefined;
  private constructor(readonly port: number) {}
  get url() {
    return `http://127.0.0.1:${this.port}/hooks/in`;
  }
  static async start(port?: number): Promise<Receiver> {
    const r = new Receiver(port ?? (await freePort()));
    await r.open();
    return r;
  }
  async open(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.hits.push({ headers: flat(req.headers), body: Buffer.concat(chunks).toString('utf8') });
        if (!this.hang) res.writeHead(this.status, { 'content-type': 'text/plain' }).end('ok');
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }
  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
const flat = (h: IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));

/** `standardwebhooks` checks the timestamp against the wall clock; the gateway's is the test's ManualClock. */
function verify(secret: string, hit: { headers: Record<string, string>; body: string }, at: Date): any {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
  try {
    return new Webhook(secret).verify(hit.body, hit.headers);
  } finally {
    vi.useRealTimers();
  }
}


let t: TestGateway;
const receivers: Receiver[] = [];
const receiver = async (port?: number) => {
  const r = await Receiver.start(port);
  receivers.push(r);
  return r;
};
beforeAll(async () => {
  // Sessions outlive the days the clock moves through.
  t = await startTestGateway({ env: { SVC_SESSION_TTL_SECONDS: String(10 * 365 * 86400) } });
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await t?.close();
});

async function newHook(c: SvcClient, url: string, extra: Record<string, unknown> = {}) {
  const r = await call(c, 'POST', '/v1/webhooks', { url, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; secret: string; url: string; events: string[] | null; enabled: boolean };
}
const deliveries = async (c: SvcClient, id: string) => (await call<any[]>(c, 'GET', `/v1/webhooks/${id}/deliveries`)).body;
const seconds = (d: Date) => String(Math.floor(d.getTime() / 1000));

describe('webhook endpoints', () => {
  it('returns the secret once; the list and the stored row never show it', async () => {
    const s = await t.signIn();
    const rec = await receiver();
    const hook = await newHook(s.client, rec.url, { description: 'ops' });
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(hook.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    expect(hook).toMatchObject({ object: 'webhook', url: rec.url, events: null, description: 'ops', enabled: true, disabled_at: null });
    expect(hook.id).toMatch(/^wh_/);

    const list = await call<any[]>(s.client, 'GET', '/v1/webhooks');
    expect(list.status).toBe(200);
    expect(Array.isArray(list.body)).toBe(true);
    expect(list.body).toHaveLength(1);
    expect(list.body[0]).not.toHaveProperty('secret');
    expect(JSON.stringify(list.body)).not.toContain(hook.secret.slice(6));
    expect(list.body[0]).toMatchObject({ id: hook.id, url: rec.url, enabled: true });

    const row = await t.gw.database.db.selectFrom('webhooks').selectAll().where('id', '=', hook.id).executeTakeFirstOrThrow();
    expect(row.secret_sealed).not.toContain(hook.secret.slice(6));
    expect(Buffer.from(row.secret_sealed, 'base64').toString('latin1')).not.toContain(hook.secret);

    // Another account sees none of it.
    const other = await t.signIn();
    expect((await call<any[]>(other.client, 'GET', '/v1/webhooks')).body).toEqual([]);
    for (const [m, p] of [['DELETE', `/v1/webhooks/${hook.id}`], ['GET', `/v1/webhooks/${hook.id}/deliveries`], ['POST', `/v1/webhooks/${hook.id}/test`]] as const) {
      const r = await call(other.client, m, p);
      expect(r.status, `${m} ${p}`).toBe(404);
      expect(r.body.error.type).toBe('not_found');
    }
    // Session only.
    expect((await t.client.raw('GET', '/v1/webhooks')).status).toBe(401);
  });

  it('refuses URLs that are not http(s), carry credentials or point at the gateway (400 naming url); nothing is written', async () => {
    const s = await t.signIn();
    const port = new URL(t.url).port;
    const bad = [
      'ftp://example.com/hook',
      'file:///etc/passwd',
      'not a url',
      'https://user:pw@example.com/hook',
      `${t.url}/v1/keys`,
      `http://localhost:${port}/v1/keys`,
      `http://[::1]:${port}/x`,
      `http://127.9.9.9:${port}/x`,
      `http://2130706433:${port}/x`, // 127.0.0.1 in decimal
    ];
    for (const url of bad) {
      const r = await call(s.client, 'POST', '/v1/webhooks', { url });
      expect(r.status, url).toBe(400);
      expect(r.body.error, url).toMatchObject({ type: 'invalid_request', param: 'url' });
      expect(r.body.error.message, url).toMatch(/url/);
    }
    const badEvents = await call(s.client, 'POST', '/v1/webhooks', { url: 'https://example.com/h', events: ['nope'] });
    expect(badEvents.status).toBe(400);
    expect(badEvents.body.error.param).toBe('events[0]');
    const extra = await call(s.client, 'POST', '/v1/webhooks', { url: 'https://example.com/h', secret: 'mine' });
    expect(extra.status).toBe(400);
    expect((await call<any[]>(s.client, 'GET', '/v1/webhooks')).body).toEqual([]);
    // Loopback on another port (a local receiver) is fine.
    expect((await call(s.client, 'POST', '/v1/webhooks', { url: `http://127.0.0.1:${Number(port) === 65535 ? 1 : Number(port) + 1}/x` })).status).toBe(201);
  });
});

describe('deliveries', () => {
  it('delivers a webhook_test event signed per Standard Webhooks, once', async () => {
    const s = await t.signIn();
    const rec = await receiver();
    const hook = await newHook(s.client, rec.url, { events: ['balance_low'] }); // the test event ignores the filter
    const fired = await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`);
    expect(fired.status).toBe(202);
    expect(fired.body).toMatchObject({ object: 'event', type: 'webhook_test', webhook_id: hook.id });
    expect(rec.hits).toHaveLength(0); // queued, not sent inline

    t.clock.advance(1_000);
    const at = t.clock.now();
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(1);
    const hit = rec.hits[0]!;
    expect(hit.headers['webhook-id']).toBe(fired.body.id);
    expect(hit.headers['webhook-timestamp']).toBe(seconds(at));
    expect(hit.headers['content-type']).toBe('application/json');
    const payload = verify(hook.secret, hit, at);
    expect(payload).toMatchObject({ id: fired.body.id, type: 'webhook_test', account_id: s.accountId, data: { webhook_id: hook.id } });
    // The signature binds the body, the id and the key.
    expect(() => verify(hook.secret, { ...hit, body: hit.body.replace('webhook_test', 'webhook_tesT') }, at)).toThrow();
    expect(() => verify(hook.secret, { ...hit, headers: { ...hit.headers, 'webhook-id': 'evt_other' } }, at)).toThrow();
    const otherSecret = (await newHook(s.client, rec.url)).secret;
    expect(() => verify(otherSecret, hit, at)).toThrow();

    const d = await deliveries(s.client, hook.id);
    expect(d).toEqual([
      { delivery_id: expect.stringMatching(/^whd_/), event_id: fired.body.id, event_type: 'webhook_test', attempt: 1, status_code: 200, error: null, duration_ms: expect.any(Number), outcome: 'delivered', next_attempt_at: null, at: at.toISOString() },
    ]);
    t.clock.advance(3_600_000);
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(1);
  });

  it('fans an emitted event out to the enabled webhooks whose filter matches', async () => {
    const s = await t.signIn();
    const all = await receiver();
    const lowOnly = await receiver();
    const off = await receiver();
    const hAll = await newHook(s.client, all.url);
    await newHook(s.client, lowOnly.url, { events: ['balance_low'] });
    const hOff = await newHook(s.client, off.url);
    expect((await call(s.client, 'DELETE', `/v1/webhooks/${hOff.id}`)).body).toMatchObject({ id: hOff.id, enabled: false, disabled_at: expect.any(String) });
    const id = await t.gw.services.webhooks.emit(s.accountId, 'subscription_renewed', { plan: 'pro' });
    expect(id).toMatch(/^evt_/);
    await t.gw.leader.runAllOnce();
    expect(all.hits.map((h) => JSON.parse(h.body).type)).toEqual(['subscription_renewed']);
    expect(verify(hAll.secret, all.hits[0]!, t.clock.now()).data).toEqual({ plan: 'pro' });
    expect(lowOnly.hits).toHaveLength(0);
    expect(off.hits).toHaveLength(0);
    // An account with no matching webhook records nothing.
    const lonely = await t.signIn();
    expect(await t.gw.services.webhooks.emit(lonely.accountId, 'balance_low', {})).toBeNull();
  });

  it('retries a failed delivery after the backoff (receiver answered 500), with the same webhook-id', async () => {
    const s = await t.signIn();
    const rec = await receiver();
    rec.status = 500;
    const hook = await newHook(s.client, rec.url);
    const ev = (await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`)).body;
    const first = t.clock.now();
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(1);
    let d = await deliveries(s.client, hook.id);
    expect(d[0]).toMatchObject({ attempt: 1, status_code: 500, error: 'HTTP 500', outcome: 'retrying', next_attempt_at: new Date(first.getTime() + 30_000).toISOString() });

    rec.status = 200;
    t.clock.advance(29_000);
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(1); // not due yet
    t.clock.advance(1_000);
    const second = t.clock.now();
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(2);
    expect(rec.hits[1]!.headers['webhook-id']).toBe(ev.id);
    expect(rec.hits[1]!.headers['webhook-timestamp']).toBe(seconds(second));
    expect(verify(hook.secret, rec.hits[1]!, second).type).toBe('webhook_test');
    d = await deliveries(s.client, hook.id);
    expect(d.map((x) => [x.attempt, x.outcome, x.status_code])).toEqual([
      [2, 'delivered', 200],
      [1, 'retrying', 500],
    ]);
  });

  it('counts a timeout as a failed attempt (SVC_WEBHOOK_TIMEOUT_SECONDS; default 10)', async () => {
    expect(t.gw.config.webhooks.timeoutMs).toBe(10_000);
    const short = await startTestGateway({ env: { SVC_WEBHOOK_TIMEOUT_SECONDS: '1' } });
    try {
      const s = await short.signIn();
      const rec = await receiver();
      rec.hang = true;
      const hook = await newHook(s.client, rec.url);
      await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`);
      await short.gw.leader.runAllOnce();
      const d = await deliveries(s.client, hook.id);
      expect(d[0]).toMatchObject({ attempt: 1, status_code: null, error: 'timed out after 1 s', outcome: 'retrying', duration_ms: expect.any(Number) });
      expect(rec.hits).toHaveLength(1); // it reached the receiver, which never answered: the timeout ended it
    } finally {
      await short.close();
    }
  });

  it(`gives up after ${MAX_ATTEMPTS} attempts on the documented schedule (receiver down)`, async () => {
    const s = await t.signIn();
    const rec = await receiver();
    await rec.close(); // connection refused from now on
    const hook = await newHook(s.client, rec.url);
    await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`);
    const times: Date[] = [t.clock.now()];
    await t.gw.leader.runAllOnce();
    for (const wait of RETRY_SCHEDULE_SECONDS) {
      t.clock.advance(wait * 1000 - 1000);
      await t.gw.leader.runAllOnce(); // a second early: nothing
      t.clock.advance(1000);
      times.push(t.clock.now());
      await t.gw.leader.runAllOnce();
    }
    t.clock.advance(7 * 86_400_000);
    await t.gw.leader.runAllOnce();
    const d = await deliveries(s.client, hook.id);
    expect(d).toHaveLength(MAX_ATTEMPTS);
    expect(d.map((x) => x.attempt)).toEqual([6, 5, 4, 3, 2, 1]);
    expect(d.map((x) => x.outcome)).toEqual(['failed', 'retrying', 'retrying', 'retrying', 'retrying', 'retrying']);
    expect(d.map((x) => x.at)).toEqual(times.map((x) => x.toISOString()).reverse());
    for (const x of d) {
      expect(x.status_code).toBeNull();
      expect(x.error).toMatch(/ECONNREFUSED/);
    }
    const row = await t.gw.database.db.selectFrom('webhook_deliveries').selectAll().where('webhook_id', '=', hook.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'failed', attempts: 6, next_attempt_at: null });
  });

  it('disabling cancels pending deliveries; a disabled webhook refuses test events (409)', async () => {
    const s = await t.signIn();
    const rec = await receiver();
    rec.status = 503;
    const hook = await newHook(s.client, rec.url);
    await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`);
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(1);
    expect((await call(s.client, 'DELETE', `/v1/webhooks/${hook.id}`)).status).toBe(200);
    expect((await call(s.client, 'DELETE', `/v1/webhooks/${hook.id}`)).body.enabled).toBe(false); // idempotent
    rec.status = 200;
    t.clock.advance(86_400_000);
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(1);
    const test = await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`);
    expect(test.status).toBe(409);
    expect(test.body.error.type).toBe('conflict');
    const row = await t.gw.database.db.selectFrom('webhook_deliveries').select('status').where('webhook_id', '=', hook.id).executeTakeFirstOrThrow();
    expect(row.status).toBe('canceled');
    expect((await deliveries(s.client, hook.id)).map((x) => [x.outcome, x.next_attempt_at])).toEqual([['retrying', null]]);

    // History older than 30 days is pruned by the leader.
    t.clock.advance(31 * 86_400_000);
    await t.gw.leader.runAllOnce();
    expect(await deliveries(s.client, hook.id)).toEqual([]);
    expect(await t.gw.database.db.selectFrom('webhook_deliveries').select('id').where('webhook_id', '=', hook.id).execute()).toEqual([]);
  });

  it('keeps at most 50 attempts in the deliveries list', async () => {
    const s = await t.signIn();
    const rec = await receiver();
    const hook = await newHook(s.client, rec.url);
    for (let i = 0; i < 55; i++) await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`);
    await t.gw.leader.runAllOnce();
    expect(rec.hits).toHaveLength(55);
    expect(new Set(rec.hits.map((h) => h.headers['webhook-id'])).size).toBe(55);
    expect(await deliveries(s.client, hook.id)).toHaveLength(50);
  });
});

describe('a control-plane restart', () => {
  it('delivers a retry that was pending when the process stopped', async () => {
    const first = await startTestGateway({ persistent: true });
    let second: TestGateway | undefined;
    try {
      const s = await first.signIn();
      const rec = await receiver();
      await rec.close(); // down for the first attempt
      const hook = await newHook(s.client, rec.url);
      const ev = (await call(s.client, 'POST', `/v1/webhooks/${hook.id}/test`)).body;
      await first.gw.leader.runAllOnce();
      expect((await deliveries(s.client, hook.id))[0]).toMatchObject({ attempt: 1, outcome: 'retrying' });
      await first.stop();

      await rec.open(); // back up, same address
      second = await startTestGateway({ share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, clock: first.clock });
      await second.gw.leader.runAllOnce();
      expect(rec.hits).toHaveLength(0); // not due yet: the schedule survived the restart
      second.clock.advance(RETRY_SCHEDULE_SECONDS[0] * 1000);
      const at = second.clock.now();
      await second.gw.leader.runAllOnce();
      expect(rec.hits).toHaveLength(1);
      expect(rec.hits[0]!.headers['webhook-id']).toBe(ev.id);
      expect(verify(hook.secret, rec.hits[0]!, at)).toMatchObject({ id: ev.id, type: 'webhook_test' });
      // The session outlives the process too; the new one lists both attempts.
      const d = await deliveries(second.client.withCredential({ kind: 'session', token: s.token }), hook.id);
      expect(d.map((x) => [x.attempt, x.outcome])).toEqual([
        [2, 'delivered'],
        [1, 'retrying'],
      ]);
    } finally {
      await second?.stop();
      await first.close();
    }
  });

  it('keeps webhooks off private, loopback and link-local addresses unless SVC_WEBHOOK_ALLOW_PRIVATE is on', async () => {
    const first = await startTestGateway({ persistent: true, env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'false' } });
    let second: TestGateway | undefined;
    try {
      const s = await first.signIn();
      for (const url of ['http://127.0.0.1:9/x', 'http://localhost:9/', 'http://10.1.2.3/in', 'http://[::1]:9/', 'http://169.254.169.254/latest/meta-data', 'http://[::ffff:192.168.1.1]/', 'http://100.64.0.1/']) {
        const r = await call(s.client, 'POST', '/v1/webhooks', { url });
        expect(r.status, url).toBe(400);
        expect(r.body.error).toMatchObject({ type: 'invalid_request', param: 'url' });
      }
      expect((await call(s.client, 'GET', '/v1/webhooks')).body).toEqual([]);
      // A public address is accepted (nothing is sent at creation).
      expect((await call(s.client, 'POST', '/v1/webhooks', { url: 'http://93.184.216.34/hooks' })).status).toBe(201);
      await first.stop();

      // Allowed on the next start: a loopback receiver is created; then off again, its delivery is refused.
      const rec = await receiver();
      second = await startTestGateway({ share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, clock: first.clock, env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
      const session = second.client.withCredential({ kind: 'session', token: s.token });
      const hook = await newHook(session, rec.url);
      await second.stop();
      const third = await startTestGateway({ share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, clock: first.clock, env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'false' } });
      second = third;
      const mine = third.client.withCredential({ kind: 'session', token: s.token });
      expect((await call(mine, 'POST', `/v1/webhooks/${hook.id}/test`)).status).toBeLessThan(300);
      await third.gw.leader.runAllOnce();
      expect(rec.hits).toHaveLength(0);
      const [attempt] = await deliveries(mine, hook.id);
      expect(attempt).toMatchObject({ attempt: 1, outcome: 'retrying', status_code: null });
      expect(attempt!.error).toMatch(/^refused: 127\.0\.0\.1 is not a public address/);
    } finally {
      await second?.stop();
      await first.close();
    }
  });
});
