import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { notarize, notaryAccount } from './support/notary.ts';

interface Snapshot {
  counts: Record<string, number>;
  recent: Record<string, Array<Record<string, unknown>>>;
  generated_at: string;
  cache_seconds: number;
}

describe('GET /v1/explorer', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => t?.close());

  const explorer = async () => {
    const res = await fetch(`${t.url}/v1/explorer`); // public
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('public, max-age=15');
    return (await res.json()) as Snapshot;
  };

  it('counts proofs, lists shared receipts and anchor batches, and shows no account', async () => {
    const before = await explorer();
    const a = await notaryAccount(t);
    const kept = await notarize(a.api, 'run-x');
    const shared = await notarize(a.api);
    await a.client.request('POST', `/v1/receipts/${shared.id}/share`);
    await a.client.request('POST', '/v1/runs/run-x/proof'); // queues the run head for anchoring
    await t.gw.leader.runAllOnce(); // one batch

    // The snapshot is kept for 15 s: nothing new yet.
    expect(await explorer()).toEqual(before);
    t.clock.advance(15_000);
    const now = await explorer();
    expect(now.counts.receipts).toBe(before.counts.receipts! + 2);
    expect(now.counts.notary_receipts).toBe(before.counts.notary_receipts! + 2);
    expect(now.counts.shared_receipts).toBe(before.counts.shared_receipts! + 1);
    expect(now.counts.runs).toBe(before.counts.runs! + 1);
    expect(now.counts.anchor_batches).toBe(before.counts.anchor_batches! + 1);
    expect(now.counts.anchored_artifacts).toBe(before.counts.anchored_artifacts! + 3); // two receipts and the run head

    expect(now.recent.shared_receipts![0]).toMatchObject({ id: shared.id, kind: 'notary', page_url: `${t.url}/r/${shared.id}` });
    expect(now.recent.shared_receipts!.some((r) => r.id === kept.id)).toBe(false);
    const batch = now.recent.anchors![0]!;
    expect(batch).toMatchObject({ leaf_count: 3, anchored_on: [] });
    const doc = await fetch(batch.url as string);
    expect(doc.status).toBe(200);
    // Counts other proof modules register: passports (with the newest minted) and sealed calls.
    await a.client.request('POST', '/v1/calls', { body: { text: 'counted, never listed' } });
    const handle = `explorer-${Date.now().toString(36)}`;
    await a.client.request('POST', '/v1/passport', { body: { handle } });
    t.clock.advance(15_000);
    const later = await explorer();
    expect(later.counts.sealed_calls).toBe((now.counts.sealed_calls ?? 0) + 1);
    expect(later.counts.passports).toBe((now.counts.passports ?? 0) + 1);
    expect(later.recent.passports![0]).toMatchObject({ handle, verified_runs: 1 });
    expect(later.recent.sealed_calls).toBeUndefined();
    expect(later.counts).toMatchObject({ verdicts: 0, published_verdicts: 0 }); // judge verdicts register their totals

    // Public: no account id anywhere.
    expect(JSON.stringify(later)).not.toContain(a.accountId);
  });
});
