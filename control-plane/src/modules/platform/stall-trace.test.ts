import { afterEach, describe, expect, it } from 'vitest';
import { StallTrace } from './stall-trace.ts';

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

  it.runIf(process.platform === 'linux')("splits a request's time into work on the main thread, waiting for a core, and waiting off it", async () => {
    t.start();
    t.reset();
    const began = t.requestStart();
    expect(began).not.toBeNull();
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    while (process.cpuUsage(cpu0).user < 20_000); // 20 ms of CPU, this thread's alone (nothing else of the process runs)
    await new Promise((r) => setTimeout(r, 30)); // then at least 30 ms off it
    t.request(performance.now() - t0, performance.now(), began);
    const split = t.report().thread!;
    const total = t.report().requests.max_ms;
    // The spin ran on the thread; during the sleep it did not run (off it, or waiting for a core once the timer
    // was due, on a busy machine). The three parts add up to the request's time.
    expect(split.ran_ms).toBeGreaterThanOrEqual(5);
    expect(split.off_thread_ms + split.waited_for_core_ms).toBeGreaterThanOrEqual(20); // less any turns the test runner took meanwhile
    expect(Math.abs(split.ran_ms + split.waited_for_core_ms + split.off_thread_ms - total)).toBeLessThan(1);
  });
});
