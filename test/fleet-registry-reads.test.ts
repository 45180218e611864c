import { afterAll, beforeAll, expect, it } from 'vitest';
import { sql } from 'kysely';
import { NODE_INDEX_REFRESH_MS } from '../control-plane/src/fleet/node-index.ts';
import { READ_PAGE } from '../control-plane/src/fleet/registry-view.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * Whole reads of the node registry (the scheduler's view) are shared: callers that ask while one is under way get
 * the next one together, which began after they asked, so a burst of dispatches needing the whole registry costs
 * at most two reads and none of them misses a node enrolled before it asked.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  await t?.close();
});

it('shares whole reads among concurrent callers, each read begun after its callers asked', async () => {
  const registry = t.gw.fleet.registry;
  const { accountId } = await t.signIn();
  await registry.enroll(accountId, { kinds: ['sandbox'], name: 'first' });
  const first = registry.view.snapshots();
  // Enrolled after the first read began: every later caller's read must see it.
  const late = (await registry.enroll(accountId, { kinds: ['sandbox'], name: 'late' })).node.id;
  const burst = Array.from({ length: 20 }, () => registry.view.snapshots());
  const results = await Promise.all([first, ...burst]);
  // The burst costs at most two reads: the one it waited for, shared (and, when the first caller's read had ended
  // before the burst came, the one its first caller began meanwhile).
  expect(new Set(results.slice(1)).size).toBeLessThanOrEqual(2);
  for (const r of results.slice(1)) expect(r.map((n) => n.id)).toContain(late);
  // Once both ended, a caller starts a read of its own at once.
  const again = await registry.view.snapshots();
  expect(results).not.toContain(again);
  expect(again.map((n) => n.id)).toContain(late);
});

it("refreshes the view from other writers' rows only: its own writes went into it as they committed", async () => {
  const registry = t.gw.fleet.registry;
  const db = t.gw.database.db;
  const { accountId } = await t.signIn();
  const id = (await registry.enroll(accountId, { kinds: ['sandbox'], name: 'writers' })).node.id;
  await registry.view.snapshots();
  // The registry's own write names this process as the row's writer, and is in the view at once.
  await registry.setGate(accountId, id, 'draining', true);
  expect(await db.selectFrom('nodes').select('changed_by').where('id', '=', id).executeTakeFirstOrThrow()).toEqual({ changed_by: t.gw.database.processId });
  expect(registry.view.index.get(id)?.draining).toBe(true);

  // Another process's write (its connection names it): read by the next refresh.
  await db.transaction().execute(async (trx) => {
    await sql`select set_config('svc.writer', 'svc_p_another', true)`.execute(trx);
    await trx.updateTable('nodes').set({ speed_factor: 7 }).where('id', '=', id).execute();
  });
  expect(registry.view.index.get(id)?.speedFactor).not.toBe(7);
  await registry.view.refresh();
  expect(registry.view.index.get(id)?.speedFactor).toBe(7);

  // A write in this process that bypasses the registry is not read back by a refresh (nothing of the product
  // writes nodes so), only by the next full read.
  await db.updateTable('nodes').set({ speed_factor: 3 }).where('id', '=', id).execute();
  await registry.view.refresh();
  expect(registry.view.index.get(id)?.speedFactor).toBe(7);
  await registry.view.snapshots();
  expect(registry.view.index.get(id)?.speedFactor).toBe(3);
});

it('reads more changed rows than one page holds in pages, and takes every one of them', async () => {
  const registry = t.gw.fleet.registry;
  const { accountId } = await t.signIn();
  await registry.view.snapshots();
  const n = READ_PAGE * 2 + 17;
  await t.gw.database.db.transaction().execute(async (trx) => {
    await sql`select set_config('svc.writer', 'svc_p_another', true)`.execute(trx);
    await sql`
      insert into nodes (id, account_id, kinds, key_hash, key_prefix, created_at)
      select 'node_paged_' || lpad(i::text, 4, '0'), ${accountId}, '["sandbox"]', 'paged_' || i, 'p', now() from generate_series(1, ${n}) i`.execute(trx);
  });
  await registry.view.refresh();
  const ids = [...registry.view.index.all()].map((x) => x.id).filter((id) => id.startsWith('node_paged_'));
  expect(ids.length).toBe(n);
});

it('refreshes the view on its own once it is stale, with no dispatch asking', async () => {
  const registry = t.gw.fleet.registry;
  const { accountId } = await t.signIn();
  const id = (await registry.enroll(accountId, { kinds: ['sandbox'], name: 'timer' })).node.id;
  await registry.view.snapshots();
  registry.view.stop();
  registry.view.start(() => undefined, 25); // the wake-up; whether the view is stale is the gateway's clock's to say
  try {
    await t.gw.database.db.transaction().execute(async (trx) => {
      await sql`select set_config('svc.writer', 'svc_p_another', true)`.execute(trx);
      await trx.updateTable('nodes').set({ speed_factor: 9 }).where('id', '=', id).execute();
    });
    expect(registry.view.index.get(id)?.speedFactor).not.toBe(9); // not stale yet: no read
    t.clock.advance(NODE_INDEX_REFRESH_MS);
    await expect.poll(() => registry.view.index.get(id)?.speedFactor).toBe(9);
  } finally {
    registry.view.stop();
  }
});
