import { afterEach, describe, expect, it } from 'vitest';
import { SchedProbe, StallTrace, type SchedSample, type SchedSource } from './stall-trace.ts';

describe('stall trace', () => {
  const t = new StallTrace();
  afterEach(() => t.stop());

  it('records nothing while off', () => {
    t.request(5, 10);
    t.span('settle_commit', 1, 9);
    expect(t.report().requests.count).toBe(0);
  });

  it('says which spans overlapped the requests at or above the p99, and what no span covers', () => {
    t.start();
    t.reset();
    for (let i = 0; i < 99; i++) t.request(1, 10 + 2 * i); // 1 ms each, apart
    t.request(10, 1000); // the slow one: [990, 1000]
    t.span('settle_commit', 992, 996); // 4 ms inside it
    t.span('journal_write', 995, 997); // overlaps the commit by 1 ms: the union is 5 ms
    t.span('leader_expire_holds', 2000, 2001); // after it
    t.span('upstream_wait', 989, 993); // two waits in flight at once, overlapping in the request: 990-994, counted once
    t.span('upstream_wait', 991, 994);
    const r = t.report();
    expect(r.requests.count).toBe(100);
    expect(r.requests.max_ms).toBeCloseTo(10, 1);
    expect(r.requests.p50_ms).toBeCloseTo(1, 1);
    expect(r.slow.count).toBe(1);
    expect(r.slow.threshold_ms).toBe(10);
    expect(r.slow.causes).toEqual({ settle_commit: { requests: 1, overlap_ms: 4 }, journal_write: { requests: 1, overlap_ms: 2 }, upstream_wait: { requests: 1, overlap_ms: 4 } });
    expect(r.slow.uncovered_ms).toBe(3); // 990-997 covered
    expect(r.spans.leader_expire_holds).toEqual({ count: 1, total_ms: 1, max_ms: 1 });
  });

  it('forgets what it recorded on reset', () => {
    t.start();
    t.request(3, 5);
    t.reset();
    expect(t.report().requests.count).toBe(0);
    expect(t.report().slow.count).toBe(0);
  });

  it("splits a request's time into work on the main thread, waiting for a core, and waiting off it", () => {
    // Scheduler counters as the thread would report them (ms on a core, ms runnable but waiting for one).
    const samples: SchedSample[] = [{ ran: 100, waited: 40 }, { ran: 120, waited: 45 }, { ran: 121, waited: 45 }, { ran: 151, waited: 65 }];
    const sched: SchedSource = { open: () => true, read: () => samples.shift() ?? null, close: () => undefined };
    const s = new StallTrace({ sched });
    s.start();
    try {
      const a = s.requestStart(); // 100 / 40
      s.request(50, 1000, a); // 120 / 45: 20 ran, 5 waited for a core, 25 off the thread
      const b = s.requestStart(); // 121 / 45
      s.request(60, 2000, b); // 151 / 65: 30 ran, 20 waited, 10 off
      const r = s.report();
      expect(r.thread).toEqual({ ran_ms: 50, waited_for_core_ms: 25, off_thread_ms: 35 });
      expect(r.slow.threshold_ms).toBe(60);
      expect(r.slow.thread).toEqual({ ran_ms: 30, waited_for_core_ms: 20, off_thread_ms: 10 });
    } finally {
      s.stop();
    }
  });

  it('gives no split when the counters cannot be read', () => {
    const s = new StallTrace({ sched: { open: () => false, read: () => null, close: () => undefined } });
    s.start();
    try {
      expect(s.requestStart()).toBeNull();
      s.request(5, 10, null);
      expect(s.report().requests.count).toBe(1);
      expect(s.report().thread).toBeUndefined();
    } finally {
      s.stop();
    }
  });

  it.runIf(process.platform === 'linux')("reads this thread's scheduler counters on Linux, which grow as the thread runs", () => {
    const probe = new SchedProbe();
    expect(probe.open()).toBe(true);
    try {
      const before = probe.read()!;
      const cpu0 = process.cpuUsage();
      while (process.cpuUsage(cpu0).user < 20_000); // this thread on a core
      const after = probe.read()!;
      expect(after.ran).toBeGreaterThan(before.ran);
      expect(after.waited).toBeGreaterThanOrEqual(before.waited);
    } finally {
      probe.close();
    }
  });
});
