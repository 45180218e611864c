import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** The largest number kept from an earlier run that is believed (anything else in the file is ignored). */
const MAX_KEPT = Number.MAX_SAFE_INTEGER - 1_000_000_000;

/**
 * The agent's numbers for its connections to the control plane (ConnectionParams.connection), which tells
 * later connections from earlier ones: each is larger than every one before it, across restarts on this data
 * dir too. The first is the time in ms × 1000, or one more than the last number used on this data dir when that
 * is larger (the clock went back since: a VM restored from a snapshot, a host without a clock before NTP; the
 * control plane would take the agent's new connections for older ones). The last number is kept in `file`.
 */
export class ConnectionNumbers {
  private last: number;

  constructor(
    private readonly file: string | null,
    now = Date.now(),
  ) {
    let kept = 0;
    if (file) {
      try {
        const n = Number(readFileSync(file, 'utf8').trim());
        if (Number.isSafeInteger(n) && n > 0 && n <= MAX_KEPT) kept = n;
      } catch {
        // none kept yet
      }
    }
    this.last = Math.max(now * 1000, kept);
  }

  next(): number {
    this.last += 1;
    if (this.file) {
      try {
        mkdirSync(dirname(this.file), { recursive: true });
        writeFileSync(this.file, String(this.last));
      } catch {
        // Not kept: numbers still increase within this run, and the next run starts from its clock.
      }
    }
    return this.last;
  }
}
