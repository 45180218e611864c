import { availableParallelism, freemem } from 'node:os';
import type { Limits } from '@svc/shared';
import type { Box, SandboxDocker } from './docker.ts';
import { POOL_LIMITS, resourceLimits } from './limits.ts';
import { PoolSize } from './pool-size.ts';

/**
 * Warm boxes never held above this, whatever the demand and the node's memory: a back-to-back stream of
 * runs outpaces the engine's refills (a container start is ~200 ms of a 2-core engine against a ~30 ms
 * warm run), so the stock is what serves a burst; 64 covers a burst of about two seconds.
 */
export const POOL_MAX = 64;
/**
 * What a warm box holds while it waits, measured: its containerd shim (~13 MiB resident), docker-init and
 * an idle shell. Its memory limit is only claimed by the run that takes it, when it has left the pool.
 */
export const WARM_BOX_BYTES = 16 * 1024 * 1024;
/** Boxes prepared at once: each is engine work (runc, mounts) that running programs wait behind on a small node. */
const FILL_PARALLEL = Math.max(1, Math.min(3, availableParallelism()));
/** How often the pool compares itself with its target when no run arrives (grows ahead of demand, trims when idle). */
const TICK_MS = 1000;
/**
 * The engine's background work for the pool (preparing boxes, removing used ones) waits while runs are under
 * way or came within this long: a container start costs a small node's engine about as much CPU as a
 * raw `docker run`, and a run beside one is several times slower (on 2 cores, `echo hi` from 6 ms to a
 * p95 of 240 ms). The pool's stock absorbs the stream; the work is done in the gaps.
 */
export const QUIET_MS = 250;
/** Used boxes (exited, holding only disk) waiting for a gap before the engine is made to remove them anyway. */
const MAX_USED = 32;

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
 *
 * Runs report their start and end (`runStarted`, `runEnded`): while runs come close together the pool
 * prepares no boxes unless its stock is short (under a quarter of the target), and used boxes wait for a
 * gap (QUIET_MS) before they are removed.
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
  private readonly now: () => number;
  /** Runs under way, and when the last one started or ended. */
  private running = 0;
  private lastRunAt = -Infinity;
  /** A `fill()` is waiting: prepare at full speed until the target is reached, runs or not. */
  private urgent = false;
  /** Used boxes to remove, and removals under way. */
  private readonly used: Box[] = [];
  private removing = 0;
  private gap: NodeJS.Timeout | undefined;

  constructor(
    private readonly sd: SandboxDocker,
    /** Boxes kept with no demand (the floor); 0 turns the pool off. */
    readonly size: number,
    private readonly log: (m: string) => void = () => undefined,
    o: WarmPoolOptions = {},
  ) {
    this.parallel = o.parallel ?? FILL_PARALLEL;
    this.now = o.now ?? (() => performance.now());
    this.sizing = new PoolSize({
      floor: size,
      maxBoxes: o.maxBoxes ?? POOL_MAX,
      boxBytes: () => WARM_BOX_BYTES,
      availableBytes: o.availableBytes ?? freemem,
      now: this.now,
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

  /** Boxes being prepared now. */
  get preparingBoxes(): number {
    return this.preparing;
  }

  /** Used boxes not yet removed. */
  get pendingRemoval(): number {
    return this.used.length + this.removing;
  }

  /**
   * Starts filling to the target at full speed; returns when it is reached (or filling gave up for now) and
   * no removal is under way.
   */
  fill(): Promise<void> {
    this.urgent = true;
    this.kick();
    if (this.preparing === 0 && this.removing === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** A run began (warm or cold): the engine's background work holds back until a gap. */
  runStarted(): void {
    this.running++;
    this.lastRunAt = this.now();
  }

  /**
   * A run ended; `box` (warm or cold, if it got one) is done with. Its stdio is closed at once, so a
   * runner that never got its program exits; the container and volume are removed in the next gap.
   */
  runEnded(box: Box | undefined): void {
    this.running = Math.max(0, this.running - 1);
    this.lastRunAt = this.now();
    if (box) {
      box.stdio.destroy();
      if (this.closed) void this.remove(box);
      else this.used.push(box);
    }
    if (this.running === 0) {
      clearTimeout(this.gap);
      this.gap = setTimeout(() => this.adjust(), QUIET_MS);
      this.gap.unref();
    }
    this.adjust();
  }

  /** No run under way nor within QUIET_MS. */
  private quiet(): boolean {
    return this.running === 0 && this.now() - this.lastRunAt >= QUIET_MS;
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

  /**
   * Starts preparing boxes up to the target (a few at a time), removes used boxes and the ones above the
   * target: in a gap between runs, or when filling is urgent; while runs come close together, only one box
   * at a time and only when the stock is short, and removals only when too many wait.
   */
  private adjust(): void {
    if (!this.closed) {
      const target = this.sizing.target();
      const quiet = this.quiet();
      // Above the target (demand fell): the oldest go first; the newest have the limits of the latest run.
      if (quiet) for (const box of this.ready.splice(0, Math.max(0, this.ready.length - target))) this.used.push(box);
      const short = this.ready.length < Math.max(1, Math.ceil(target / 4));
      const parallel = quiet || this.urgent ? this.parallel : short ? 1 : 0;
      while (!this.retry && this.preparing < parallel && this.ready.length + this.preparing < target) void this.prepare();
      const removals = quiet ? this.parallel : this.used.length > MAX_USED ? 1 : 0;
      while (this.removing < removals && this.used.length > 0) void this.remove(this.used.shift()!);
    }
    if (this.preparing === 0) this.urgent = false;
    if (this.preparing === 0 && this.removing === 0) for (const resolve of this.waiting.splice(0)) resolve();
  }

  private async remove(box: Box): Promise<void> {
    this.removing++;
    try {
      await this.sd.destroyBox(box);
    } catch (e) {
      this.log(`sandbox: removing ${box.name} failed (the reaper will): ${(e as Error).message}`);
    } finally {
      this.removing--;
      this.adjust();
    }
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
      box.stdio.destroy();
      this.used.push(box);
    }
    if (this.size > 0) this.sizing.missed();
    this.kick();
    return undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearTimeout(this.gap);
    clearInterval(this.tick);
    // Boxes being prepared are destroyed as they come (prepare() sees `closed`); wait for them.
    while (this.preparing > 0) await new Promise<void>((resolve) => this.waiting.push(resolve));
    const boxes = [...this.ready.splice(0), ...this.used.splice(0)];
    await Promise.all(boxes.map((b) => this.sd.destroyBox(b).catch(() => undefined)));
  }
}

function sameCgroupLimits(a: Limits, b: Limits): boolean {
  return a.memory_mb === b.memory_mb && a.cpus === b.cpus && a.pids === b.pids;
}
