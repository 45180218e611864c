import { availableParallelism, freemem } from 'node:os';
import type { Limits } from '@svc/shared';
import type { Box, SandboxDocker } from './docker.ts';
import { POOL_LIMITS, resourceLimits } from './limits.ts';
import { PoolSize } from './pool-size.ts';

/** Warm boxes never held above this, whatever the demand and the node's memory. */
export const POOL_MAX = 32;
/** Boxes prepared at once: each is engine work (runc, mounts) that running programs wait behind on a small node. */
const FILL_PARALLEL = Math.max(1, Math.min(3, availableParallelism()));
/** How often the pool compares itself with its target when no run arrives (grows ahead of demand, trims when idle). */
const TICK_MS = 1000;

export interface WarmPoolOptions {
  maxBoxes?: number;
  /** Boxes prepared at once. */
  parallel?: number;
  now?: () => number;
  availableBytes?: () => number;
}

/**
 * Warm containers of the sandbox image for one-shot runs without network: created, started (idle init
 * process), network none, workspace volume mounted. A run takes one, gets the job's limits applied with
 * `docker update`, runs its program, and the box is destroyed after. The pool holds as many boxes as
 * PoolSize asks for (a floor, more while runs arrive fast, within a ceiling), prepares up to a few at a
 * time in the background, and removes the ones above its target when demand falls. A pool miss (empty, or
 * a box that will not take the limits) is the caller's cold path. Boxes are never reused between runs.
 */
export class WarmPool {
  private readonly ready: Box[] = [];
  private readonly sizing: PoolSize;
  private readonly parallel: number;
  private preparing = 0;
  private waiting: Array<() => void> = [];
  private started = false;
  private closed = false;
  private failures = 0;
  private retry: NodeJS.Timeout | undefined;
  private tick: NodeJS.Timeout | undefined;
  /** New warm boxes get the limits of the last run, so the next run like it skips `docker update`. */
  private limits: Limits = POOL_LIMITS;

  constructor(
    private readonly sd: SandboxDocker,
    /** Boxes kept with no demand (the floor); 0 turns the pool off. */
    readonly size: number,
    private readonly log: (m: string) => void = () => undefined,
    o: WarmPoolOptions = {},
  ) {
    this.parallel = o.parallel ?? FILL_PARALLEL;
    this.sizing = new PoolSize({
      floor: size,
      maxBoxes: o.maxBoxes ?? POOL_MAX,
      boxBytes: () => this.limits.memory_mb * 1024 * 1024,
      availableBytes: o.availableBytes ?? freemem,
      now: o.now ?? (() => performance.now()),
    });
  }

  get available(): number {
    return this.ready.length;
  }

  /** Boxes the pool aims to hold now. */
  get target(): number {
    return this.sizing.target();
  }

  /** The most boxes the pool would hold now (its maximum, or less when the node's memory is short). */
  get ceiling(): number {
    return this.size > 0 ? this.sizing.ceiling() : 0;
  }

  /** Starts filling to the target; returns when it is reached (or filling gave up for now). */
  fill(): Promise<void> {
    this.kick();
    if (this.preparing === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** Starts the pool's own ticks (once) and adjusts it now. */
  private kick(): void {
    if (this.closed || this.size <= 0) return;
    if (!this.started) {
      this.started = true;
      this.tick = setInterval(() => this.adjust(), TICK_MS);
      this.tick.unref();
    }
    this.adjust();
  }

  /** Starts preparing boxes up to the target (a few at a time), or removes the ones above it. */
  private adjust(): void {
    if (!this.closed) {
      const target = this.sizing.target();
      // Above the target (demand fell): the oldest go first; the newest have the limits of the latest run.
      for (const box of this.ready.splice(0, Math.max(0, this.ready.length - target))) void this.sd.destroyBox(box).catch(() => undefined);
      while (!this.retry && this.preparing < this.parallel && this.ready.length + this.preparing < target) void this.prepare();
    }
    if (this.preparing === 0) for (const resolve of this.waiting.splice(0)) resolve();
  }

  private async prepare(): Promise<void> {
    this.preparing++;
    try {
      const box = await this.sd.createBox({ kind: 'pool', mode: 'runner', owner: 'pool', network: false, limits: this.limits });
      if (this.closed) await this.sd.destroyBox(box).catch(() => undefined);
      else this.ready.push(box);
      this.failures = 0;
    } catch (e) {
      this.failures++;
      // Backs off (1 s, 2 s, ... 60 s) and tries again; runs meanwhile take the cold path.
      const delay = Math.min(60_000, 1000 * 2 ** (this.failures - 1));
      if (this.failures === 1 || this.failures % 10 === 0) this.log(`sandbox pool: cannot prepare a warm container (retrying in ${delay / 1000} s): ${(e as Error).message}`);
      clearTimeout(this.retry);
      this.retry = setTimeout(() => {
        this.retry = undefined;
        this.adjust();
      }, delay);
      this.retry.unref();
    } finally {
      this.preparing--;
      this.adjust();
    }
  }

  /** A warm box with `limits` applied, or undefined on a miss. The caller owns (and destroys) it. */
  async take(limits: Limits): Promise<Box | undefined> {
    this.limits = limits;
    if (this.size > 0) this.sizing.arrived();
    for (let box = this.ready.shift(); box; box = this.ready.shift()) {
      this.kick();
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
    if (this.size > 0) this.sizing.missed();
    this.kick();
    return undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.tick);
    // Boxes being prepared are destroyed as they come (prepare() sees `closed`); wait for them.
    while (this.preparing > 0) await new Promise<void>((resolve) => this.waiting.push(resolve));
    const boxes = this.ready.splice(0);
    await Promise.all(boxes.map((b) => this.sd.destroyBox(b).catch(() => undefined)));
  }
}

function sameCgroupLimits(a: Limits, b: Limits): boolean {
  return a.memory_mb === b.memory_mb && a.cpus === b.cpus && a.pids === b.pids;
}
