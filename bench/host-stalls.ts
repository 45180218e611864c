import { availableParallelism } from 'node:os';
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { percentile } from './load.ts';

/**
 * What the machine itself does to a thread's latency, measured before a bench's rows so that their tails
 * can be read against it:
 * - `held`: one busy thread per core, each reading the clock in a loop; a gap between two readings is time
 *   the thread did not run although it never yielded (the host's scheduling of the vCPUs, interrupts, other
 *   processes). Counted per thread per second over 1 ms, and as the share of time lost in gaps over 0.1 ms.
 * - `woken`: one thread sleeping 1 ms at a time (Atomics.wait) on an otherwise quiet machine; how late it
 *   wakes, p50, p99, p99.9 and max. On a VM this is the cost of waking an idle (halted) vCPU.
 * - `wokenBeside`: the same while busy threads keep the other cores running, as a database's commit or a
 *   collector's helper threads do beside a gateway's event loop.
 * - `haltPollNs`: the guest's halt polling (cpuidle-haltpoll's guest_halt_poll_ns), null where it is not
 *   there: 0 means an idle vCPU halts at once, and whatever wakes it waits for the host to run it again.
 */
type Wake = { p50Ms: number; p99Ms: number; p999Ms: number; maxMs: number };

export interface HostStalls {
  cores: number;
  held: { over1msPerSecond: number; lostShare: number; maxMs: number };
  woken: Wake;
  wokenBeside: Wake;
  haltPollNs: number | null;
}

const SPIN = `
const { parentPort, workerData } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
const mode = workerData.mode, ms = workerData.ms;
const end = performance.now() + ms;
if (mode === 'spin') {
  let prev = performance.now(), over1 = 0, lost = 0, max = 0;
  for (;;) {
    const t = performance.now();
    const gap = t - prev;
    prev = t;
    if (gap > 0.1) { lost += gap; if (gap > 1) over1++; if (gap > max) max = gap; }
    if (t > end) break;
  }
  parentPort.postMessage({ over1, lost, max });
} else {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  const late = [];
  while (performance.now() < end) {
    const t0 = performance.now();
    Atomics.wait(cell, 0, 0, 1);
    late.push(performance.now() - t0 - 1);
  }
  parentPort.postMessage({ late });
}`;

function run<T>(mode: 'spin' | 'sleep', ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const w = new Worker(SPIN, { eval: true, workerData: { mode, ms } });
    w.once('message', (m: T) => resolve(m));
    w.once('error', reject);
  });
}

function haltPollNs(): number | null {
  try {
    return Number(readFileSync('/sys/module/haltpoll/parameters/guest_halt_poll_ns', 'utf8').trim());
  } catch {
    return null;
  }
}

function wake(late: number[]): Wake {
  return { p50Ms: percentile(late, 50), p99Ms: percentile(late, 99), p999Ms: percentile(late, 99.9), maxMs: Math.max(...late) };
}

/** Measures for `ms` milliseconds each: all cores busy, one thread sleeping, then one sleeping beside busy ones. */
export async function measureHostStalls(ms = 2000): Promise<HostStalls> {
  const cores = availableParallelism();
  const spins = await Promise.all(Array.from({ length: cores }, () => run<{ over1: number; lost: number; max: number }>('spin', ms)));
  const woken = wake((await run<{ late: number[] }>('sleep', ms)).late);
  const beside = await Promise.all([run<{ late: number[] }>('sleep', ms), ...Array.from({ length: cores - 1 }, () => run('spin', ms))]);
  return {
    cores,
    held: {
      over1msPerSecond: spins.reduce((s, x) => s + x.over1, 0) / cores / (ms / 1000),
      lostShare: spins.reduce((s, x) => s + x.lost, 0) / cores / ms,
      maxMs: Math.max(...spins.map((x) => x.max)),
    },
    woken,
    wokenBeside: wake(beside[0].late),
    haltPollNs: haltPollNs(),
  };
}

const late = (w: Wake) => `p50 ${w.p50Ms.toFixed(3)} / p99 ${w.p99Ms.toFixed(3)} / p99.9 ${w.p999Ms.toFixed(3)} / max ${w.maxMs.toFixed(1)} ms`;

/** One line for a bench's header. */
export function hostStallsLine(h: HostStalls): string {
  const poll = h.haltPollNs === null ? 'no guest halt polling module' : `guest halt polling ${h.haltPollNs} ns`;
  return (
    `machine: ${h.cores} cores all busy: each held away over 1 ms ${h.held.over1msPerSecond.toFixed(1)} times/s, ` +
    `${(h.held.lostShare * 100).toFixed(2)}% of its time lost in gaps over 0.1 ms (max ${h.held.maxMs.toFixed(1)} ms); ` +
    `a thread sleeping 1 ms wakes late by ${late(h.woken)} alone, ${late(h.wokenBeside)} beside busy cores; ${poll}`
  );
}

if (import.meta.url === `file://${process.argv[1]}`) console.log(hostStallsLine(await measureHostStalls(Number(process.argv[2] ?? 2000))));
