import { describe, expect, it } from 'vitest';
import type { JobOutput } from '@svc/shared';
import { JobOutputs } from './job-outputs.ts';

/** A control plane that takes each message when told to (`answer`), recording what it got. */
function slowControlPlane(results: boolean[] = []) {
  const got: JobOutput[][] = [];
  const waiting: Array<() => void> = [];
  return {
    got,
    deliver: (batch: JobOutput[]) =>
      new Promise<boolean>((resolve) => {
        got.push(batch);
        waiting.push(() => resolve(results.shift() ?? true));
      }),
    /** Answers the oldest message on its way; resolves once the queue has acted on it. */
    async answer(): Promise<void> {
      waiting.shift()!();
      for (let i = 0; i < 5; i++) await Promise.resolve();
    },
    get onTheWay() {
      return waiting.length;
    },
  };
}

describe('JobOutputs', () => {
  it('sends one message at a time, in order, with what gathered while the one before was on its way', async () => {
    const cp = slowControlPlane();
    const q = new JobOutputs('job_1', cp.deliver);
    for (let i = 0; i < 1000; i++) q.emit('stdout', `c${i}`);
    expect(cp.onTheWay).toBe(1);
    while (cp.onTheWay > 0) await cp.answer();
    await q.sent();
    expect(cp.got.map((b) => b.length)).toEqual([1, 512, 487]);
    const all = cp.got.flat();
    expect(all.map((o) => o.seq)).toEqual([...Array(1000).keys()]);
    expect(all.map((o) => o.data)).toEqual([...Array(1000).keys()].map((i) => `c${i}`));
    expect(all.every((o) => o.job_id === 'job_1' && o.stream === 'stdout')).toBe(true);
    expect(q.undelivered).toBe(false);
  });

  it('splits a message at 4 MiB of output, and sends an output larger than that alone', async () => {
    const cp = slowControlPlane();
    const q = new JobOutputs('job_1', cp.deliver);
    const MiB = 1024 * 1024;
    q.emit('stdout', 'first');
    q.emit('stdout', 'a'.repeat(3 * MiB));
    q.emit('stdout', 'b'.repeat(2 * MiB));
    q.emit('stdout', 'c'.repeat(5 * MiB));
    q.emit('stdout', 'd');
    while (cp.onTheWay > 0) await cp.answer();
    await q.sent();
    expect(cp.got.map((b) => b.map((o) => o.data[0]))).toEqual([['f'], ['a'], ['b'], ['c'], ['d']]);
  });

  it('makes an emitter wait once a message of outputs is waiting, until the backlog is down to half', async () => {
    const cp = slowControlPlane();
    let rooms = 0;
    const q = new JobOutputs('job_1', cp.deliver, () => rooms++);
    q.emit('stdout', 'first'); // on its way
    const waits = [];
    for (let i = 0; i < 512; i++) waits.push(q.emit('stdout', 'x'));
    expect(waits.slice(0, 511).every((w) => w === undefined)).toBe(true);
    expect(waits[511]).toBeInstanceOf(Promise);
    expect(q.held).toBe(true);
    let let_go = false;
    void waits[511]!.then(() => (let_go = true));
    const more = q.emit('stdout', 'y'); // a second emitter past the limit waits too
    expect(more).toBeInstanceOf(Promise);
    await cp.answer(); // 'first' answered: 512 go out in the next message, 1 stays
    expect(let_go).toBe(true);
    expect(rooms).toBe(1);
    expect(q.held).toBe(false);
    await more;
    while (cp.onTheWay > 0) await cp.answer();
    await q.sent();
    expect(cp.got.flat()).toHaveLength(514);
  });

  it('makes an emitter wait past 4 MiB of output waiting', () => {
    const cp = slowControlPlane();
    const q = new JobOutputs('job_1', cp.deliver);
    q.emit('stdout', 'first');
    expect(q.emit('stdout', 'a'.repeat(4 * 1024 * 1024 - 1))).toBeUndefined();
    expect(q.emit('stdout', 'b')).toBeInstanceOf(Promise);
  });

  it('lets every waiting emitter go on release', async () => {
    const cp = slowControlPlane();
    const q = new JobOutputs('job_1', cp.deliver);
    q.emit('stdout', 'first');
    let w: void | Promise<void> = undefined;
    for (let i = 0; i < 520; i++) w = q.emit('stdout', 'x') ?? w;
    expect(q.held).toBe(true);
    q.release();
    expect(q.held).toBe(false);
    await w; // resolves without any message answered
    expect(cp.onTheWay).toBe(1);
  });

  it('goes on after a message that could not be delivered, and says so', async () => {
    const cp = slowControlPlane([true, false, true]);
    const q = new JobOutputs('job_1', cp.deliver);
    q.emit('stdout', 'a');
    q.emit('stdout', 'b');
    await cp.answer(); // a: delivered
    q.emit('stdout', 'c');
    await cp.answer(); // b: not delivered
    expect(q.undelivered).toBe(true);
    await cp.answer(); // c
    await q.sent();
    expect(cp.got.map((b) => b.map((o) => o.data).join(''))).toEqual(['a', 'b', 'c']);
    expect(q.undelivered).toBe(true);
  });

  it('starts sending again after it went idle, and sent() covers the later outputs', async () => {
    const cp = slowControlPlane();
    const q = new JobOutputs('job_1', cp.deliver);
    q.emit('stderr', 'a');
    await cp.answer();
    await q.sent();
    q.emit('stderr', 'b');
    let done = false;
    void q.sent().then(() => (done = true));
    await Promise.resolve();
    expect(done).toBe(false);
    await cp.answer();
    await q.sent();
    expect(cp.got.flat().map((o) => [o.seq, o.stream, o.data])).toEqual([
      [0, 'stderr', 'a'],
      [1, 'stderr', 'b'],
    ]);
  });
});
