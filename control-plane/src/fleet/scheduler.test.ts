import { describe, expect, it } from 'vitest';
import { nodeSnapshot } from './node-snapshot.fixture.ts';
import { isEligible, isOnline, pickNode, score, smoothedReliability, type NodeSnapshot } from './scheduler.ts';

const now = new Date('2026-11-22T12:00:00Z');
const node = (over: Partial<NodeSnapshot> = {}): NodeSnapshot => nodeSnapshot(new Date(now.getTime() - 10_000), over);

describe('eligibility', () => {
  it('requires approval, no gate, a fresh heartbeat, the kind and the model', () => {
    expect(isEligible(node(), { kind: 'sandbox' }, now)).toBe(true);
    expect(isEligible(node({ approved: false }), { kind: 'sandbox' }, now)).toBe(false);
    expect(isEligible(node({ disabled: true }), { kind: 'sandbox' }, now)).toBe(false);
    expect(isEligible(node({ draining: true }), { kind: 'sandbox' }, now)).toBe(false);
    expect(isEligible(node({ lastHeartbeatAt: null }), { kind: 'sandbox' }, now)).toBe(false);
    expect(isEligible(node(), { kind: 'inference' }, now)).toBe(false);
    expect(isEligible(node({ kinds: ['inference'], models: ['m1'] }), { kind: 'inference', model: 'm2' }, now)).toBe(false);
    expect(isEligible(node({ kinds: ['inference'], models: ['m1'] }), { kind: 'inference', model: 'm1' }, now)).toBe(true);
    expect(isEligible(node(), { kind: 'sandbox', exclude: ['node_a'] }, now)).toBe(false);
  });

  it('goes offline after three missed 60-second heartbeats, not before', () => {
    expect(isOnline({ lastHeartbeatAt: new Date(now.getTime() - 180_000) }, now)).toBe(true);
    expect(isOnline({ lastHeartbeatAt: new Date(now.getTime() - 180_001) }, now)).toBe(false);
  });
});

describe('score', () => {
  it('smooths reliability (inside the score only) so a new node starts at one half', () => {
    expect(smoothedReliability({ succeeded: 0, failed: 0 })).toBe(0.5);
    expect(smoothedReliability({ succeeded: 8, failed: 0 })).toBe(0.9);
    expect(smoothedReliability({ succeeded: 3, failed: 3 })).toBe(0.5);
    expect(score(node())).toBeCloseTo(0.25);
  });

  it('prefers faster, more reliable, less loaded, lower-latency nodes', () => {
    const base = score(node({ succeeded: 10 }));
    expect(score(node({ succeeded: 10, speedFactor: 2 }))).toBeCloseTo(2 * base);
    expect(score(node({ succeeded: 5, failed: 5 }))).toBeLessThan(base);
    expect(score(node({ succeeded: 10, runningJobs: 1 }))).toBeCloseTo(base / 2);
    expect(score(node({ succeeded: 10, latencyMs: 1000 }))).toBeCloseTo(base / 2);
  });
});

describe('pickNode', () => {
  it('picks the best eligible node, deterministically, or none', () => {
    const a = node({ id: 'node_a' });
    const b = node({ id: 'node_b', speedFactor: 3 });
    const c = node({ id: 'node_c', speedFactor: 10, draining: true });
    expect(pickNode([a, b, c], { kind: 'sandbox' }, now)?.id).toBe('node_b');
    expect(pickNode([b, a], { kind: 'sandbox', exclude: ['node_b'] }, now)?.id).toBe('node_a');
    expect(pickNode([node({ id: 'node_z' }), node({ id: 'node_y' })], { kind: 'sandbox' }, now)?.id).toBe('node_y');
    expect(pickNode([c], { kind: 'sandbox' }, now)).toBeNull();
    expect(pickNode([], { kind: 'sandbox' }, now)).toBeNull();
  });

  it('spreads load: a busy fast node loses to an idle one', () => {
    const busy = node({ id: 'node_busy', speedFactor: 2, runningJobs: 3 });
    const idle = node({ id: 'node_idle', speedFactor: 1 });
    expect(pickNode([busy, idle], { kind: 'sandbox' }, now)?.id).toBe('node_idle');
  });
});
