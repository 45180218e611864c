import { readFileSync, readdirSync } from 'node:fs';

/** CPU seconds (user + system, all threads) a process used so far, from Linux /proc; 0 once it is gone. */
export function processCpuSeconds(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
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
