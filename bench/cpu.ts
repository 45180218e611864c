import { readFileSync, readdirSync } from 'node:fs';

/** CPU seconds (user + system; all threads, or the one named by `thread`) a process used so far, from Linux /proc; 0 once it is gone. */
export function processCpuSeconds(pid: number, thread?: number): number {
  try {
    const f = readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100; // clock ticks of 10 ms
  } catch {
    return 0;
  }
}

/** CPU seconds used so far by every postgres process on the machine (all backends and helpers). */
export function postgresCpuSeconds(): number {
  let s = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') s += processCpuSeconds(Number(pid));
    } catch {
      /* gone */
    }
  }
  return s;
}

/** CPU seconds the whole machine spent busy and idle so far (all cores; /proc/stat's first line). */
export function machineCpuSeconds(): { busy: number; idle: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3]! + f[4]!; // idle + iowait
  const all = f.slice(0, 8).reduce((a, b) => a + b, 0); // user .. steal
  return { busy: (all - idle) / 100, idle: idle / 100 };
}

/**
 * Seconds a thread has run and has waited, runnable, for a core so far (/proc/<pid>/task/<tid>/schedstat, in
 * ns); zeros once it is gone. The wait is what the machine's other processes took from it.
 */
export function threadSchedSeconds(pid: number, thread: number): { ran: number; waited: number } {
  try {
    const [ran, waited] = readFileSync(`/proc/${pid}/task/${thread}/schedstat`, 'utf8').trim().split(' ').map(Number);
    return { ran: ran! / 1e9, waited: waited! / 1e9 };
  } catch {
    return { ran: 0, waited: 0 };
  }
}
