/** The arrival rate of runs is smoothed over about this long (an exponentially weighted rate). */
export const RATE_TAU_MS = 1000;
/** The pool holds this long of the recent demand: a refill takes hundreds of ms on a busy 2-core engine. */
export const LEAD_MS = 2000;
/** Once demand stops, what the pool holds above its floor halves this often (a full pool takes the engine tens of seconds to refill). */
export const HALF_LIFE_MS = 60_000;
/** Warm boxes together may hold at most this share of the node's available memory. */
export const MEMORY_SHARE = 0.25;

export interface PoolSizeOptions {
  /** Boxes kept warm with no demand. */
  floor: number;
  /** Boxes never kept above this, whatever the demand and memory. */
  maxBoxes: number;
  /** The memory one warm box holds while it waits, in bytes. */
  boxBytes: () => number;
  /** Memory available on the node now, in bytes. */
  availableBytes: () => number;
  /** Milliseconds on any monotonic clock. */
  now: () => number;
}

/**
 * How many warm boxes the pool should hold: enough for LEAD_MS of the recent arrival rate of runs, never
 * fewer than the floor nor more than the ceiling (maxBoxes, and MEMORY_SHARE of the node's available memory
 * at what one warm box holds). A rise in demand raises the target at once, so refills start while the
 * pool still has boxes, and a run that finds the pool empty doubles it. After a burst the target comes down
 * gradually (HALF_LIFE_MS), so the next burst soon after finds the pool still large, and an idle pool is
 * back at its floor within minutes (from 64 boxes: about seven).
 */
export class PoolSize {
  private rateAt = 0;
  private rateValue = 0; // runs per ms at rateAt
  private peak: number;
  private peakAt = 0;

  constructor(private readonly o: PoolSizeOptions) {
    this.peak = o.floor;
  }

  get floor(): number {
    return this.o.floor;
  }

  /** A run asked for a warm box. */
  arrived(): void {
    const now = this.o.now();
    this.rateValue = this.ratePerMs(now) + 1 / RATE_TAU_MS;
    this.rateAt = now;
    const want = this.fromRate(now);
    if (want > this.held(now)) [this.peak, this.peakAt] = [want, now];
  }

  /**
   * A run found the pool empty: the stock was short of the demand, whatever the rate says (runs that wait
   * for a cold container arrive less often, so the rate undercounts what the caller would send). The target
   * doubles, within the ceiling.
   */
  missed(): void {
    const now = this.o.now();
    const was = Math.max(this.o.floor, this.fromRate(now), this.held(now));
    [this.peak, this.peakAt] = [Math.min(2 * was, this.ceiling()), now];
  }

  /** Runs per second, recently. */
  rate(): number {
    return this.ratePerMs(this.o.now()) * 1000;
  }

  /** The node's ceiling now: maxBoxes, and the memory share at the warm boxes' limit (never below the floor). */
  ceiling(): number {
    const byMemory = Math.floor((this.o.availableBytes() * MEMORY_SHARE) / Math.max(1, this.o.boxBytes()));
    return Math.max(this.o.floor, Math.min(this.o.maxBoxes, byMemory));
  }

  /** Boxes to hold now (ready and being prepared). */
  target(): number {
    if (this.o.floor <= 0) return 0;
    const now = this.o.now();
    return Math.min(this.ceiling(), Math.max(this.o.floor, this.fromRate(now), this.held(now)));
  }

  private ratePerMs(now: number): number {
    return this.rateValue * Math.exp(-Math.max(0, now - this.rateAt) / RATE_TAU_MS);
  }

  private fromRate(now: number): number {
    return Math.ceil(this.ratePerMs(now) * LEAD_MS - 1e-9);
  }

  /** The last peak, its excess over the floor decayed since. */
  private held(now: number): number {
    const excess = Math.max(0, this.peak - this.o.floor);
    return this.o.floor + Math.round(excess * 2 ** (-(now - this.peakAt) / HALF_LIFE_MS));
  }
}
