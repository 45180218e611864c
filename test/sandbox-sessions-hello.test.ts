import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * The sessions agents say they hold on connect, read for many nodes at once (a reconnecting fleet): each node's
 * running sessions it did not name are lost, those it named and those of other nodes are not touched, and a
 * session idle past its timeout is left to end by itself.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t?.close();
});

it('hellos of several nodes read together lose each node its own unheld sessions, and nothing else', async () => {
  const owner = await t.signIn();
  const enroll = async () => (await owner.client.request<{ node: { id: string } }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } })).node.id;
  const [n1, n2, n3] = [await enroll(), await enroll(), await enroll()];
  const now = t.clock.now();
  const session = (id: string, nodeId: string, lastActive = now) => ({
    id, account_id: owner.accountId, key_id: null, node_id: nodeId, status: 'running' as const, network: false,
    idle_timeout_seconds: 600, snapshot_id: null, image_digest: null, created_at: now, last_active_at: lastActive, stopped_at: null,
  });
  const db = t.gw.database.db;
  await db.insertInto('sandbox_sessions').values([
    session('ses_held_1', n1), session('ses_gone_1', n1),
    session('ses_held_2', n2), session('ses_gone_2', n2), session('ses_idle_2', n2, new Date(now.getTime() - 700_000)),
    session('ses_other_3', n3),
  ]).execute();

  const held = t.gw.fleet.hub.sessionsHeld!;
  // Said together: one round for all of them (and a second hello of n1 in that round counts as its latest).
  await Promise.all([held(n1, ['ses_gone_1']), held(n2, ['ses_held_2']), held(n1, ['ses_held_1'])]);

  const rows = await db.selectFrom('sandbox_sessions').select(['id', 'status']).where('account_id', '=', owner.accountId).orderBy('id').execute();
  expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual({
    ses_gone_1: 'lost',
    ses_gone_2: 'lost',
    ses_held_1: 'running',
    ses_held_2: 'running',
    ses_idle_2: 'running', // idle-expired: it ends as stopped, not lost
    ses_other_3: 'running', // its node said nothing
  });
});
