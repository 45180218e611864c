import { closeSync, openSync, readSync } from 'node:fs';
import { PerformanceObserver, constants, type PerformanceEntry, createHistogram, monitorEventLoopDelay, performance, type IntervalHistogram, type RecordableHistogram } from 'node:perf_hooks';

/**
 * What holds up the main thread around slow requests (`SVC_STALL_TRACE=true`; off by default, when every
 * call below returns at once). The process records, on the main thread:
 * - each request's time in the gateway (start to response), in a histogram and as an interval;
 * - the event loop's delay (`monitorEventLoopDelay`);
 * - garbage-collection pauses by kind (a `PerformanceObserver` on `gc`);
 * - spans of the work suspected of stalling it, marked where that work runs: the gathered settle commit,
 *   the settle journal's writes, the signer's answers, the leader's loops.
 * - on Linux, the main thread's scheduler figures at each request's start and end
 *   (/proc/thread-self/schedstat: time on a core, time runnable but waiting for one), which split a request's
 *   time into work on the main thread, waiting for a core (other processes held both), and waiting off the
 *   thread (the database, the upstream, the signer, the network).
 * `report()` takes the requests slower than the p99 and says, per cause, how many of them a pause or span
 * overlapped and for how long in all, and how much of their time no recorded cause covers.
 */

/** The main thread's scheduler counters (ms on a core, ms waiting for one), or null where Linux's schedstat is not readable. */
export type SchedSample = { ran: number; waited: number };

/** Where the scheduler counters come from: Linux's /proc/thread-self/schedstat, or a test's own figures. */
export interface SchedSource {
  /** Whether counters can be read here. */
  open(): boolean;
  read(): SchedSample | null;
  close(): void;
}

export class SchedProbe implements SchedSource {
  private fd = -1;
  private readonly buf = Buffer.alloc(96);

  open(): boolean {
    try {
      this.fd = openSync('/proc/thread-self/schedstat', 'r');
      return this.read() !== null;
    } catch {
      this.fd = -1;
      return false;
    }
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }

  read(): SchedSample | null {
    if (this.fd < 0) return null;
    const n = readSync(this.fd, this.buf, 0, this.buf.length, 0);
    const [ran, waited] = this.buf.toString('latin1', 0, n).split(' ');
    return { ran: Number(ran) / 1e6, waited: Number(waited) / 1e6 };
  }
}

/** Intervals kept (each a start and an end): the newest win. */
const CAPACITY = 1 << 18;

class Intervals {
  readonly start = new Float64Array(CAPACITY);
  readonly end = new Float64Array(CAPACITY);
  readonly kind = new Uint16Array(CAPACITY);
  count = 0;

  add(kind: number, start: number, end: number): void {
    const i = this.count++ % CAPACITY;
    this.start[i] = start;
    this.end[i] = end;
    this.kind[i] = kind;
  }

  /** The intervals kept, oldest first, with their slots. */
  *each(): Generator<{ kind: number; start: number; end: number; slot: number }> {
    const n = Math.min(this.count, CAPACITY);
    const first = this.count > CAPACITY ? this.count % CAPACITY : 0;
    for (let k = 0; k < n; k++) {
      const i = (first + k) % CAPACITY;
      yield { kind: this.kind[i]!, start: this.start[i]!, end: this.end[i]!, slot: i };
    }
  }
}

const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'gc_scavenge',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'gc_mark_sweep',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'gc_incremental_marking',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'gc_weak_callbacks',
};

export interface CauseFigures {
  /** Slow requests this cause overlapped. */
  requests: number;
  /** Milliseconds of those requests' time it covered (per request, the union of its spans), in all. */
  overlap_ms: number;
}

export interface StallReport {
  requests: { count: number; p50_ms: number; p99_ms: number; p999_ms: number; max_ms: number };
  event_loop_delay: { p50_ms: number; p99_ms: number; max_ms: number };
  gc: Record<string, { count: number; total_ms: number; max_ms: number }>;
  spans: Record<string, { count: number; total_ms: number; max_ms: number }>;
  /** Requests at or above the p99 (the last CAPACITY requests kept), and what overlapped them. */
  slow: {
    threshold_ms: number;
    count: number;
    total_ms: number;
    causes: Record<string, CauseFigures>;
    uncovered_ms: number;
    /** Where the slow requests' time went, by the main thread's scheduler counters (absent off Linux). */
    thread?: SchedSplit;
  };
  /** The same split over every request, for comparison. */
  thread?: SchedSplit;
}

/** Milliseconds of requests' time: on the main thread's core, waiting for a core, and neither (waiting off the thread). */
export interface SchedSplit {
  ran_ms: number;
  waited_for_core_ms: number;
  off_thread_ms: number;
}

export class StallTrace {
  private on = false;
  private readonly names: string[] = ['request'];
  private readonly ids = new Map<string, number>([['request', 0]]);
  private readonly intervals = new Intervals();
  private requestTimes: RecordableHistogram = createHistogram();
  private loop: IntervalHistogram | null = null;
  private gc: PerformanceObserver | null = null;
  private readonly sched: SchedSource;
  private schedOn = false;
  /** Per kept request (same slot as its interval): main-thread ms on a core and waiting for one. */
  private readonly ran = new Float64Array(CAPACITY);
  private readonly waited = new Float64Array(CAPACITY);

  constructor(opts: { sched?: SchedSource } = {}) {
    this.sched = opts.sched ?? new SchedProbe();
  }

  get enabled(): boolean {
    return this.on;
  }

  start(): void {
    if (this.on) return;
    this.on = true;
    this.loop = monitorEventLoopDelay({ resolution: 1 });
    this.loop.enable();
    this.gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) {
        const kind = ((e as PerformanceEntry & { detail?: { kind?: number } }).detail)?.kind ?? -1;
        this.record(GC_KINDS[kind] ?? 'gc_other', e.startTime, e.startTime + e.duration);
      }
    });
    this.gc.observe({ entryTypes: ['gc'] });
    this.schedOn = this.sched.open();
  }

  stop(): void {
    this.on = false;
    this.sched.close();
    this.schedOn = false;
    this.loop?.disable();
    this.gc?.disconnect();
  }

  /** A span of main-thread work named `name` from `start` to `end` (`performance.now()` readings; now by default). */
  span(name: string, start: number, end = performance.now()): void {
    if (this.on) this.record(name, start, end);
  }

  /** The main thread's scheduler counters now, to pass to `request` at the end (null when off or unreadable). */
  requestStart(): SchedSample | null {
    return this.schedOn ? this.sched.read() : null;
  }

  /** A request answered after `ms` milliseconds in the gateway, ending at `end` (now by default); `began` is what `requestStart` gave. */
  request(ms: number, end = performance.now(), began: SchedSample | null = null): void {
    if (!this.on) return;
    this.requestTimes.record(Math.max(1, Math.round(ms * 1e3))); // microseconds
    const slot = this.intervals.count % CAPACITY;
    this.intervals.add(0, end - ms, end);
    const now = began ? this.sched.read() : null;
    this.ran[slot] = now && began ? now.ran - began.ran : NaN;
    this.waited[slot] = now && began ? now.waited - began.waited : NaN;
  }

  private record(name: string, start: number, end: number): void {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(name);
      this.ids.set(name, id);
    }
    this.intervals.add(id, start, end);
  }

  report(): StallReport {
    const h = this.requestTimes;
    const us = (v: number) => v / 1e3;
    const reqs: Array<{ start: number; end: number; slot: number }> = [];
    const causes: Array<{ kind: number; start: number; end: number }> = [];
    const gc: StallReport['gc'] = {};
    const spans: StallReport['spans'] = {};
    for (const iv of this.intervals.each()) {
      if (iv.kind === 0) {
        reqs.push({ start: iv.start, end: iv.end, slot: iv.slot });
        continue;
      }
      causes.push(iv);
      const name = this.names[iv.kind]!;
      const into = name.startsWith('gc_') ? gc : spans;
      const f = (into[name] ??= { count: 0, total_ms: 0, max_ms: 0 });
      const d = iv.end - iv.start;
      f.count++;
      f.total_ms += d;
      f.max_ms = Math.max(f.max_ms, d);
    }
    const durations = reqs.map((r) => r.end - r.start).sort((a, b) => a - b);
    const threshold = durations.length ? durations[Math.min(durations.length - 1, Math.floor(0.99 * durations.length))]! : 0;
    const slow = reqs.filter((r) => r.end - r.start >= threshold && durations.length > 0);
    causes.sort((a, b) => a.start - b.start);
    const byCause: Record<string, CauseFigures> = {};
    let total = 0;
    let uncovered = 0;
    for (const r of slow) {
      total += r.end - r.start;
      const pieces: Array<[number, number]> = [];
      const perCause = new Map<string, Array<[number, number]>>();
      for (const c of causes) {
        if (c.start >= r.end) break;
        if (c.end <= r.start) continue;
        const piece: [number, number] = [Math.max(c.start, r.start), Math.min(c.end, r.end)];
        const name = this.names[c.kind]!;
        let mine = perCause.get(name);
        if (!mine) perCause.set(name, (mine = []));
        mine.push(piece);
        pieces.push(piece);
      }
      // A cause's share of a request is the union of its spans in it: spans of work in flight (the upstream
      // waits of concurrent requests, say) overlap one another.
      for (const [name, mine] of perCause) {
        const f = (byCause[name] ??= { requests: 0, overlap_ms: 0 });
        f.requests++;
        f.overlap_ms += covered(mine);
      }
      uncovered += r.end - r.start - covered(pieces);
    }
    const round = (x: number) => Math.round(x * 1000) / 1000;
    const split = (rs: typeof reqs): SchedSplit | undefined => {
      let ran = 0;
      let waited = 0;
      let all = 0;
      for (const r of rs) {
        if (Number.isNaN(this.ran[r.slot]!)) return undefined;
        ran += this.ran[r.slot]!;
        waited += this.waited[r.slot]!;
        all += r.end - r.start;
      }
      return rs.length ? { ran_ms: round(ran), waited_for_core_ms: round(waited), off_thread_ms: round(Math.max(0, all - ran - waited)) } : undefined;
    };
    const loop = this.loop;
    return {
      requests: { count: h.count, p50_ms: us(h.percentile(50)), p99_ms: us(h.percentile(99)), p999_ms: us(h.percentile(99.9)), max_ms: us(h.max) },
      event_loop_delay: loop ? { p50_ms: loop.percentile(50) / 1e6, p99_ms: loop.percentile(99) / 1e6, max_ms: loop.max / 1e6 } : { p50_ms: 0, p99_ms: 0, max_ms: 0 },
      gc: Object.fromEntries(Object.entries(gc).map(([k, v]) => [k, { count: v.count, total_ms: round(v.total_ms), max_ms: round(v.max_ms) }])),
      spans: Object.fromEntries(Object.entries(spans).map(([k, v]) => [k, { count: v.count, total_ms: round(v.total_ms), max_ms: round(v.max_ms) }])),
      slow: {
        threshold_ms: round(threshold),
        count: slow.length,
        total_ms: round(total),
        causes: Object.fromEntries(Object.entries(byCause).map(([k, v]) => [k, { requests: v.requests, overlap_ms: round(v.overlap_ms) }])),
        uncovered_ms: round(uncovered),
        thread: split(slow),
      },
      thread: split(reqs),
    };
  }

  /** Forgets what was recorded (a bench's warm-up). */
  reset(): void {
    this.intervals.count = 0;
    this.requestTimes = createHistogram();
    this.loop?.reset();
  }
}

/** The length of the union of intervals. */
function covered(pieces: Array<[number, number]>): number {
  pieces.sort((a, b) => a[0] - b[0]);
  let sum = 0;
  let from = -Infinity;
  let to = -Infinity;
  for (const [s, e] of pieces) {
    if (s > to) {
      if (to > from) sum += to - from;
      from = s;
      to = e;
    } else to = Math.max(to, e);
  }
  if (to > from) sum += to - from;
  return sum;
}

/** The process's trace: the main thread is the process's, whatever number of gateways it runs. */
export const stallTrace = new StallTrace();
