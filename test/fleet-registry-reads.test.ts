import { afterAll, beforeAll, expect, it } from 'vitest';
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
  expect(new Set(results).size).toBeLessThanOrEqual(2); // one read for the first caller, one shared by the burst
  for (const r of results.slice(1)) expect(r.map((n) => n.id)).toContain(late);
  // Once both ended, a caller starts a read of its own at once.
  const again = await registry.view.snapshots();
  expect(results).not.toContain(again);
  expect(again.map((n) => n.id)).toContain(late);
});
