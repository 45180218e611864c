import { createServer, type Server } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { readBody } from './support/http.ts';
import { call } from './support/call.ts';

/**
 * The outbox's concurrency guarantees: one attempt of a delivery (one event to one webhook) in flight at a
 * time, however many senders run (overlapping loop runs in one process; on Postgres also a second process
 * on the same database), each event delivered once per webhook; and a lease left by a sender that died is
 * taken over once it expires, the dead sender's late result being discarded.
 */

/**
 * A receiver on loopback that holds each request `delayMs` before answering, and records per path and
 * `webhook-id` how many requests were in flight at once. `hang(path)` leaves the next request unanswered.
 */
async function receiver(delayMs: number) {
  const inflight = new Map<string, number>();
  const maxInflight = new Map<string, number>();
  const received = new Map<string, number>();
  const hanging = new Set<string>();
  const open: Array<() => void> = [];
  const server: Server = createServer((req, res) => {
    const key = `${req.url} ${req.headers['webhook-id']}`;
    inflight.set(key, (inflight.get(key) ?? 0) + 1);
    maxInflight.set(key, Math.max(maxInflight.get(key) ?? 0, inflight.get(key)!));
    received.set(key, (received.get(key) ?? 0) + 1);
    void readBody(req).then(() => {
      const done = () => {
        inflight.set(key, inflight.get(key)! - 1);
        res.writeHead(200).end();
      };
      if (hanging.delete(req.url ?? '')) open.push(done);
      else setTimeout(done, delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    base,
    inflight,
    maxInflight,
    received,
    hang: (path: string) => hanging.add(path),
    total: () => [...received.values()].reduce((a, b) => a + b, 0),
    close: () =>
      new Promise<void>((r) => {
        open.splice(0).forEach((f) => f());
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers.reverse()) await c();
});

async function until(cond: () => boolean, ms = 5_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('one delivery per event per webhook at a time', () => {
  it(`overlapping senders${TEST_DB_KIND === 'postgres' ? ' in two processes on one database' : ' in one process'} never send one delivery twice at once; each event arrives once per webhook`, async () => {
    // Postgres: a second process shares the database (the embedded database serves one process).
    const gws: TestGateway[] = [];
    if (TEST_DB_KIND === 'postgres') {
      const pair = await startGatewayPair();
      closers.push(pair.close);
      gws.push(pair.a, pair.b);
    } else {
      const g = await startTestGateway();
      closers.push(g.close);
      gws.push(g);
    }
    const g = gws[0]!;
    const rec = await receiver(30);
    closers.push(rec.close);
    const s = await g.signIn();
    const hooks = [];
    for (const path of ['/h0', '/h1', '/h2']) hooks.push((await call(s.client, 'POST', '/v1/webhooks', { url: `${rec.base}${path}` })).body.id as string);
    const events: string[] = [];
    for (let i = 0; i < 25; i++) events.push((await g.gw.services.webhooks.emit(s.accountId, 'subscription_renewed', { n: i }))!);

    // Three overlapping runs per process (timers and a manual run overlap like this), plus the leader's loops.
    const runs = gws.flatMap((x) => [x.gw.services.webhookSender.deliverDue(), x.gw.services.webhookSender.deliverDue(), x.gw.services.webhookSender.deliverDue(), x.gw.leader.runAllOnce()]);
    await Promise.all(runs);
    expect(await g.gw.services.webhookSender.deliverDue()).toBe(0); // nothing left

    expect(rec.total()).toBe(events.length * hooks.length);
    for (const path of ['/h0', '/h1', '/h2']) {
      for (const id of events) {
        expect(rec.received.get(`${path} ${id}`), `${path} ${id}`).toBe(1);
        expect(rec.maxInflight.get(`${path} ${id}`)).toBe(1);
      }
    }
    const db = g.gw.database.db;
    const rows = await db.selectFrom('webhook_deliveries').select(['status', 'attempts', 'claim_token']).where('webhook_id', 'in', hooks).execute();
    expect(rows).toHaveLength(events.length * hooks.length);
    expect(rows.every((r) => r.status === 'delivered' && r.attempts === 1 && r.claim_token === null)).toBe(true);
    const attempts = await db.selectFrom('webhook_attempts').select(['delivery_id', 'outcome']).where('webhook_id', 'in', hooks).execute();
    expect(attempts).toHaveLength(events.length * hooks.length);
    expect(new Set(attempts.map((a) => a.delivery_id)).size).toBe(attempts.length);
  });

  it('a lease is held until it expires; then another sender retakes the delivery and the stale sender’s late result is discarded', async () => {
    const g = await startTestGateway({ env: { SVC_WEBHOOK_TIMEOUT_SECONDS: '3' } });
    closers.push(g.close);
    const rec = await receiver(0);
    closers.push(rec.close);
    const s = await g.signIn();
    const hook = (await call(s.client, 'POST', '/v1/webhooks', { url: `${rec.base}/slow` })).body.id as string;
    const ev = (await call(s.client, 'POST', `/v1/webhooks/${hook}/test`)).body.id as string;
    const key = `/slow ${ev}`;
    const sender = g.gw.services.webhookSender;

    // The first sender's attempt gets no answer (a sender that stalls or dies holds the lease meanwhile).
    rec.hang('/slow');
    const stalled = sender.deliverDue();
    await until(() => rec.received.get(key) === 1);
    expect(await sender.deliverDue()).toBe(0); // leased: not sent again
    const lease = g.gw.config.webhooks.timeoutMs + 60_000;
    g.clock.advance(lease - 1);
    expect(await sender.deliverDue()).toBe(0); // still leased
    expect(rec.received.get(key)).toBe(1);

    g.clock.advance(1); // the lease ran out: the delivery is taken over
    expect(await sender.deliverDue()).toBe(1);
    expect(rec.received.get(key)).toBe(2);
    const row = () => g.gw.database.db.selectFrom('webhook_deliveries').select(['status', 'attempts', 'claim_token']).where('webhook_id', '=', hook).executeTakeFirstOrThrow();
    expect(await row()).toEqual({ status: 'delivered', attempts: 1, claim_token: null });

    // The stalled attempt times out later; its result no longer owns the delivery and is not recorded.
    expect(await stalled).toBe(1);
    expect(await row()).toEqual({ status: 'delivered', attempts: 1, claim_token: null });
    const d = (await call<any[]>(s.client, 'GET', `/v1/webhooks/${hook}/deliveries`)).body;
    expect(d.map((x) => [x.attempt, x.outcome, x.status_code])).toEqual([[1, 'delivered', 200]]);
  });
});
