import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { NODE_KEY_TRUST_MS } from '../control-plane/src/fleet/node-keys.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { ADMIN_TOKEN, startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { until } from './support/agent.ts';
import { nodeHeartbeat } from './support/node-heartbeat.ts';

/**
 * Node keys answered from memory: a heartbeat asks the database for its key only when the process has not seen the
 * key within NODE_KEY_TRUST_MS. An owner's suspension reaches the keys every process holds at once (by NOTIFY from
 * the process that suspended it), and a notification that never came is bounded by the trust period.
 */
const heartbeat = (url: string, key: string) =>
  nodeHeartbeat(url, key).then(async (r) => ({ status: r.status, type: r.status === 200 ? null : ((await r.json()) as { error: { type: string } }).error.type }));
const suspend = (url: string, accountId: string, suspended: boolean) =>
  new SvcClient({ baseUrl: url, credential: { kind: 'bearer', token: ADMIN_TOKEN } }).request('POST', '/v1/admin/accounts/suspend', { body: { account_id: accountId, suspended, reason: 'test' } });

describe('node keys trusted for a bounded time', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a suspension written where no notification follows is seen once the key is older than the trust period', async () => {
    const owner = await t.signIn();
    const { node_key } = await owner.client.request<{ node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    expect(await heartbeat(t.url, node_key)).toEqual({ status: 200, type: null });
    // Suspended behind the gateway's back: no route, so no invalidation.
    await t.gw.database.db.updateTable('accounts').set({ suspended_at: t.clock.now(), suspended_reason: 'test' }).where('id', '=', owner.accountId).execute();
    expect(await heartbeat(t.url, node_key)).toEqual({ status: 200, type: null }); // the key as this process last read it
    t.clock.advance(NODE_KEY_TRUST_MS - 1000);
    expect(await heartbeat(t.url, node_key)).toEqual({ status: 200, type: null });
    t.clock.advance(1000);
    expect(await heartbeat(t.url, node_key)).toEqual({ status: 403, type: 'account_suspended' });
    // A refused key is asked every time: lifted, it works at once.
    await t.gw.database.db.updateTable('accounts').set({ suspended_at: null, suspended_reason: null }).where('id', '=', owner.accountId).execute();
    expect(await heartbeat(t.url, node_key)).toEqual({ status: 200, type: null });
  });

  it('the registry full read teaches the keys of every node whose owner is not suspended, and only those', async () => {
    const live = await t.signIn();
    const gone = await t.signIn();
    const a = await live.client.request<{ node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    const b = await gone.client.request<{ node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    await t.gw.database.db.updateTable('accounts').set({ suspended_at: t.clock.now(), suspended_reason: 'test' }).where('id', '=', gone.accountId).execute();
    await t.gw.fleet.registry.view.snapshots();
    // Read the view's keys, then take the database away from the lookup path: a key the read taught still answers.
    await t.gw.database.db.updateTable('accounts').set({ suspended_at: t.clock.now(), suspended_reason: 'test' }).where('id', '=', live.accountId).execute();
    expect(await heartbeat(t.url, a.node_key)).toEqual({ status: 200, type: null });
    expect(await heartbeat(t.url, b.node_key)).toEqual({ status: 403, type: 'account_suspended' });
    await t.gw.database.db.updateTable('accounts').set({ suspended_at: null, suspended_reason: null }).where('id', 'in', [live.accountId, gone.accountId]).execute();
  });
});

describe.runIf(TEST_DB_KIND === 'postgres')('node keys across replicas on one Postgres', () => {
  let pair: Awaited<ReturnType<typeof startGatewayPair>>;
  beforeAll(async () => {
    pair = await startGatewayPair();
  });
  afterAll(async () => {
    await pair?.close();
  });

  it("a suspension on one replica refuses the node's key on the other, which had it in memory, and lifting it lets it in again", async () => {
    const { a, b } = pair;
    const owner = await a.signIn();
    const { node_key } = await owner.client.request<{ node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    expect(await heartbeat(a.url, node_key)).toEqual({ status: 200, type: null });
    expect(await heartbeat(b.url, node_key)).toEqual({ status: 200, type: null });

    await suspend(b.url, owner.accountId, true);
    expect(await heartbeat(b.url, node_key)).toEqual({ status: 403, type: 'account_suspended' });
    await until('the suspension reached the other replica', async () => (await heartbeat(a.url, node_key)).status === 403, 10_000);
    expect(await heartbeat(a.url, node_key)).toEqual({ status: 403, type: 'account_suspended' });

    await suspend(b.url, owner.accountId, false);
    expect(await heartbeat(a.url, node_key)).toEqual({ status: 200, type: null });
    expect(await heartbeat(b.url, node_key)).toEqual({ status: 200, type: null });
  });
});
