import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { NodeIndex } from './node-index.ts';
import { nodeSnapshot } from './node-snapshot.fixture.ts';
import { pickNode, type NodeSnapshot } from './scheduler.ts';

const clock = () => new ManualClock(new Date('2026-11-22T12:00:00Z'));
const node = (id: string, over: Partial<NodeSnapshot> = {}, c = clock()): NodeSnapshot => nodeSnapshot(new Date(c.now().getTime() - 1000), { id, ...over });

describe('the scheduler view of the registry', () => {
  it('is stale until loaded, then again once its refresh period has passed by the clock', () => {
    const c = clock();
    const index = new NodeIndex<NodeSnapshot>(c, 5000);
    expect(index.stale).toBe(true);
    index.load(index.begin(), [node('node_a')]);
    expect(index.stale).toBe(false);
    c.advance(4999);
    expect(index.stale).toBe(false);
    c.advance(1);
    expect(index.stale).toBe(true);
    // A node's own write does not make the view fresh: other processes' writes reach it only by a full read.
    index.put(node('node_a', { runningJobs: 3 }));
    expect(index.stale).toBe(true);
  });

  it('takes a node as its latest write left it, and a full read replaces the rest', () => {
    const index = new NodeIndex<NodeSnapshot>(clock());
    index.load(index.begin(), [node('node_a'), node('node_b')]);
    index.put(node('node_b', { draining: true }));
    index.put(node('node_c'));
    expect(index.get('node_b')!.draining).toBe(true);
    expect(index.size).toBe(3);
    // A later full read is the truth for every node: node_c is gone from it, node_b's gate was lifted elsewhere.
    index.load(index.begin(), [node('node_a'), node('node_b')]);
    expect([...index.all()].map((n) => n.id).sort()).toEqual(['node_a', 'node_b']);
    expect(index.get('node_b')!.draining).toBe(false);
  });

  it('keeps a write that committed while an older full read was under way', () => {
    const index = new NodeIndex<NodeSnapshot>(clock());
    index.load(index.begin(), [node('node_a'), node('node_b')]);
    const read = index.begin(); // the read sees node_a before its gate...
    index.put(node('node_a', { disabled: true })); // ...which commits (and is put) before the read answers
    index.load(read, [node('node_a'), node('node_b')]);
    expect(index.get('node_a')!.disabled).toBe(true);
    expect(pickNode(index.all(), { kind: 'sandbox' }, clock().now())!.id).toBe('node_b');
    // The next read, begun after the write, carries it.
    index.load(index.begin(), [node('node_a', { disabled: true }), node('node_b')]);
    expect(index.get('node_a')!.disabled).toBe(true);
  });

  it('drops a node whose owner is suspended until a full read brings it back', () => {
    const index = new NodeIndex<NodeSnapshot>(clock());
    index.load(index.begin(), [node('node_a'), node('node_b')]);
    index.drop('node_a');
    expect(index.get('node_a')).toBeUndefined();
    expect(pickNode(index.all(), { kind: 'sandbox' }, clock().now())!.id).toBe('node_b');
    index.load(index.begin(), [node('node_a'), node('node_b')]);
    expect(index.get('node_a')).toBeDefined();
  });

  it('is read as it is: a node silent for three intervals is not picked from it', () => {
    const c = clock();
    const index = new NodeIndex<NodeSnapshot>(c);
    index.load(index.begin(), [node('node_a', { speedFactor: 2 }, c), node('node_b', {}, c)]);
    expect(pickNode(index.all(), { kind: 'sandbox' }, c.now())!.id).toBe('node_a');
    index.put(node('node_b', { lastHeartbeatAt: new Date(c.now().getTime() + 60_000) }, c));
    c.advance(180_000); // node_a's last heartbeat is now 181 s old; node_b's 121 s
    expect(pickNode(index.all(), { kind: 'sandbox' }, c.now())!.id).toBe('node_b');
  });
});

describe('a read of the changed rows', () => {
  it('replaces the nodes it read, drops the suspended ones, and keeps what was put while it was under way', () => {
    const c = clock();
    const index = new NodeIndex<NodeSnapshot>(c, 5000);
    index.load(index.begin(), [node('node_a'), node('node_b'), node('node_c')]);
    c.advance(5000);
    expect(index.stale).toBe(true);
    const read = index.begin();
    index.put(node('node_b', { draining: true })); // committed after the read began: the later state
    index.merge(read, [node('node_a', { disabled: true }), node('node_b')], ['node_c']);
    expect(index.get('node_a')!.disabled).toBe(true);
    expect(index.get('node_b')!.draining).toBe(true);
    expect(index.get('node_c')).toBeUndefined();
    expect(index.stale).toBe(false);
  });
});
