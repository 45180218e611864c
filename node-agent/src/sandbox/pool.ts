import type { Limits } from '@svc/shared';
import type { Box, SandboxDocker } from './docker.ts';
import { POOL_LIMITS, resourceLimits } from './limits.ts';

const FILL_PARALLEL = 2;

/**
 * Warm containers of the sandbox image for one-shot runs without network: created, started (idle init
 * process), network none, workspace volume mounted. A run takes one, gets the job's limits applied with
 * `docker update`, runs its program with `docker exec`, and the box is destroyed after; a refill in the
 * background brings the pool back to its size. A pool miss (empty, or a box that will not take the
 * limits) is the caller's cold path. Boxes are never reused between runs.
 */
export class WarmPool {
  private readonly ready: Box[] = [];
  private filling: Promise<void> | undefined;
  private closed = false;
  private failures = 0;
  private retry: NodeJS.Timeout | undefined;
  /** New warm boxes get the limits of the last run, so the next run like it skips `docker update`. */
  private limits: Limits = POOL_LIMITS;

  constructor(
    private readonly sd: SandboxDocker,
    readonly size: number,
    private readonly log: (m: string) => void = () => undefined,
  ) {}

  get available(): number {
    return this.ready.length;
  }

  /** Starts filling; returns when the pool is full (or filling gave up for now). */
  fill(): Promise<void> {
    if (this.closed || this.size <= 0) return Promise.resolve();
    this.filling ??= this.fillLoop().finally(() => (this.filling = undefined));
    return this.filling;
  }

  private async fillLoop(): Promise<void> {
    while (!this.closed && this.ready.length < this.size) {
      try {
        // Prepare up to FILL_PARALLEL at once: creating a container takes hundreds of ms on a busy engine,
        // and one at a time the pool drains faster than it refills under back-to-back runs.
        const n = Math.min(FILL_PARALLEL, this.size - this.ready.length);
        const settled = await Promise.allSettled(Array.from({ length: n }, () => this.sd.createBox({ kind: 'pool', mode: 'runner', owner: 'pool', network: false, limits: this.limits })));
        const boxes = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
        const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) {
          this.ready.push(...boxes);
          throw failed.reason;
        }
        if (this.closed) {
          await Promise.all(boxes.map((b) => this.sd.destroyBox(b).catch(() => undefined)));
          return;
        }
        this.ready.push(...boxes);
        this.failures = 0;
      } catch (e) {
        this.failures++;
        // Backs off (1 s, 2 s, ... 60 s) and tries again; runs meanwhile take the cold path.
        const delay = Math.min(60_000, 1000 * 2 ** (this.failures - 1));
        if (this.failures === 1 || this.failures % 10 === 0) this.log(`sandbox pool: cannot prepare a warm container (retrying in ${delay / 1000} s): ${(e as Error).message}`);
        clearTimeout(this.retry);
        this.retry = setTimeout(() => void this.fill(), delay);
        this.retry.unref();
        return;
      }
    }
  }

  /** A warm box with `limits` applied, or undefined on a miss. The caller owns (and destroys) it. */
  async take(limits: Limits): Promise<Box | undefined> {
    this.limits = limits;
    for (let box = this.ready.shift(); box; box = this.ready.shift()) {
      void this.fill();
      try {
        if (!sameCgroupLimits(box.limits, limits)) {
          await box.container.update(resourceLimits(limits));
          box.limits = limits;
        }
        // A warm box can die while it waits (someone removed it, the engine restarted): then the next.
        if ((await box.container.inspect()).State.Running) return box;
      } catch (e) {
        this.log(`sandbox pool: a warm container did not take the job's limits: ${(e as Error).message}`);
      }
      void this.sd.destroyBox(box).catch(() => undefined);
    }
    void this.fill();
    return undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.filling?.catch(() => undefined);
    const boxes = this.ready.splice(0);
    await Promise.all(boxes.map((b) => this.sd.destroyBox(b).catch(() => undefined)));
  }
}

function sameCgroupLimits(a: Limits, b: Limits): boolean {
  return a.memory_mb === b.memory_mb && a.cpus === b.cpus && a.pids === b.pids;
}
