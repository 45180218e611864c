import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { NodeIndex } from './node-index.ts';
import { nodeSnapshot } from './node-snapshot.fixture.ts';
import { pickNode, pickRanked, score, type JobNeed, type NodeSnapshot } from './scheduler.ts';

const now = new Date('2026-11-22T12:00:00Z');

/** A small deterministic generator (mulberry32), so a failure replays. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A node with few distinct values, so ties in score are common (the id decides them). */
function randomNode(r: () => number, id: string): NodeSnapshot {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  return nodeSnapshot(new Date(now.getTime() - pick([1000, 60_000, 200_000])), {
    id,
    kinds: pick([['sandbox'], ['inference'], ['sandbox', 'inference']]),
    speedFactor: pick([0.5, 1, 1, 2]),
    approved: r() > 0.1,
    disabled: r() < 0.05,
    draining: r() < 0.1,
    runningJobs: pick([0, 0, 1, 3]),
    succeeded: pick([0, 5, 9]),
    failed: pick([0, 1]),
    latencyMs: pick([null, 100, 900]),
  });
}

const needs: JobNeed[] = [{}, { kind: 'sandbox' }, { kind: 'inference' }, { kind: 'sandbox', allowDraining: true }, { exclude: ['node_03', 'node_07'] }];

describe('the scheduler order kept by the view', () => {
  it('picks the node pickNode picks, through loads, merges, puts and drops', () => {
    const r = rng(7);
    const ids = Array.from({ length: 40 }, (_, i) => `node_${String(i).padStart(2, '0')}`);
    const index = new NodeIndex<NodeSnapshot>(new ManualClock(now));
    index.load(index.begin(), ids.slice(0, 30).map((id) => randomNode(r, id)));
    for (let step = 0; step < 2000; step++) {
      const id = ids[Math.floor(r() * ids.length)]!;
      const op = r();
      if (op < 0.6) index.put(randomNode(r, id));
      else if (op < 0.7) index.drop(id);
      else if (op < 0.8) index.merge(index.begin(), [randomNode(r, id)], [ids[Math.floor(r() * ids.length)]!]);
      else if (op < 0.82) index.load(index.begin(), ids.filter(() => r() < 0.7).map((x) => randomNode(r, x)));
      const all = [...index.all()];
      const ranked = [...index.ranked()];
      expect(ranked.length).toBe(all.length);
      for (let i = 1; i < ranked.length; i++) {
        const [a, b] = [ranked[i - 1]!, ranked[i]!];
        expect(score(a) > score(b) || (score(a) === score(b) && a.id < b.id)).toBe(true);
      }
      for (const need of needs) expect(pickRanked(index.ranked(), need, now)?.id ?? null).toBe(pickNode(all, need, now)?.id ?? null);
    }
  });

  it('moves a node whose score changed and keeps one whose score did not in place', () => {
    const index = new NodeIndex<NodeSnapshot>(new ManualClock(now));
    const n = (id: string, over: Partial<NodeSnapshot> = {}) => nodeSnapshot(new Date(now.getTime() - 1000), { id, ...over });
    index.load(index.begin(), [n('node_a'), n('node_b'), n('node_c')]);
    expect([...index.ranked()].map((x) => x.id)).toEqual(['node_a', 'node_b', 'node_c']); // a tie: lower id first
    index.put(n('node_a', { runningJobs: 1 })); // half the score
    expect([...index.ranked()].map((x) => x.id)).toEqual(['node_b', 'node_c', 'node_a']);
    index.put(n('node_c', { lastHeartbeatAt: now })); // a heartbeat: same score, same place, the newer snapshot
    expect([...index.ranked()].map((x) => x.id)).toEqual(['node_b', 'node_c', 'node_a']);
    expect([...index.ranked()][1]!.lastHeartbeatAt).toEqual(now);
    index.drop('node_b');
    expect(pickRanked(index.ranked(), {}, now)?.id).toBe('node_c');
  });

  it('leaves out a node whose score is not a number, as pickNode never picks it', () => {
    const index = new NodeIndex<NodeSnapshot>(new ManualClock(now));
    const odd = nodeSnapshot(new Date(now.getTime() - 1000), { id: 'node_nan', speedFactor: Number.NaN });
    index.load(index.begin(), [odd]);
    expect(pickNode(index.all(), {}, now)).toBeNull();
    expect(pickRanked(index.ranked(), {}, now)).toBeNull();
  });
});
