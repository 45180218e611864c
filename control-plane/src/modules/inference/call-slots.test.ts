import { describe, expect, it } from 'vitest';
import { CallSlots } from './call-slots.ts';

const never = new AbortController().signal;
const timeout = () => new Error('timed out');

describe('CallSlots', () => {
  it('hands slots out up to its size, then to waiting calls in arrival order as they come back', async () => {
    const s = new CallSlots(2);
    expect([s.tryTake(), s.tryTake(), s.tryTake()]).toEqual([true, true, false]);
    const order: number[] = [];
    const waits = [1, 2, 3].map((n) => s.wait(never).then(() => order.push(n)));
    expect(s.state).toEqual({ used: 2, waiting: 3 });
    s.release();
    s.release();
    expect(s.state).toEqual({ used: 2, waiting: 3 }); // handed over on the next turn
    await Promise.all(waits.slice(0, 2));
    expect(order).toEqual([1, 2]);
    expect(s.state).toEqual({ used: 2, waiting: 1 });
    s.release();
    await waits[2];
    s.release();
    s.release();
    expect(s.state).toEqual({ used: 0, waiting: 0 });
    expect(() => s.release()).toThrow(/released more slots than were taken/);
    expect(s.tryTake()).toBe(true);
  });

  it('a slot handed to a queue whose calls all left goes back to the free ones', async () => {
    const s = new CallSlots(1);
    s.tryTake();
    const ac = new AbortController();
    const w = s.wait(ac.signal);
    s.release();
    ac.abort(new Error('gone'));
    await expect(w).rejects.toThrow('gone');
    await new Promise((r) => setImmediate(r));
    expect(s.state).toEqual({ used: 0, waiting: 0 });
  });

  it('a call whose caller leaves, or whose time runs out, leaves the queue and holds no slot', async () => {
    const s = new CallSlots(1);
    s.tryTake();
    const ac = new AbortController();
    const gone = s.wait(ac.signal);
    const late = s.wait(never, { ms: 20, error: timeout });
    const next = s.wait(never);
    ac.abort(new Error('caller went away'));
    await expect(gone).rejects.toThrow('caller went away');
    await expect(late).rejects.toThrow('timed out');
    expect(s.state).toEqual({ used: 1, waiting: 1 });
    s.release(); // straight to `next`, past the two that left
    await next;
    expect(s.state).toEqual({ used: 1, waiting: 0 });
    const already = new AbortController();
    already.abort(new Error('already gone'));
    await expect(s.wait(already.signal)).rejects.toThrow('already gone');
    expect(s.state).toEqual({ used: 1, waiting: 0 });
  });
});
