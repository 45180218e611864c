import type { FastifyBaseLogger } from 'fastify';
import type { LeaderLock } from '../db/database.ts';
import type { Metrics } from '../metrics.ts';
import { stallTrace } from '../modules/platform/stall-trace.ts';

export interface Loop {
  name: string;
  everyMs: number;
  run(): Promise<void>;
}

/**
 * Leader election over a Postgres advisory lock. Only the leader runs the background loops; the others
 * retry the lock and take over when the leader's connection dies. `runAllOnce` lets tests drive loops
 * directly instead of waiting on timers.
 */
export class Leader {
  private leader = false;
  private stopped = false;
  private electTimer: NodeJS.Timeout | undefined;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly loops: Loop[] = [];

  constructor(
    private readonly lock: LeaderLock,
    private readonly metrics: Metrics,
    private readonly log: FastifyBaseLogger,
    private readonly retryMs: number,
    private readonly runTimers = true,
  ) {}

  add(loop: Loop): void {
    this.loops.push(loop);
    if (this.leader) this.schedule(loop);
  }

  get isLeader(): boolean {
    return this.leader;
  }

  async start(): Promise<void> {
    await this.elect();
  }

  private async elect(): Promise<void> {
    await this.electOnce();
    if (!this.stopped) {
      this.electTimer = setTimeout(() => void this.elect(), this.retryMs);
      this.electTimer.unref();
    }
  }

  /** One election round: take the lock if free, or notice that a held lock was lost. Returns leadership. */
  async electOnce(): Promise<boolean> {
    if (this.stopped) return false;
    try {
      const held = this.leader ? await this.lock.isHeld() : await this.lock.tryAcquire();
      if (held !== this.leader) {
        this.leader = held;
        this.metrics.leader.set(held ? 1 : 0);
        this.log.info({ leader: held }, held ? 'took leadership' : 'lost leadership');
        if (held) this.loops.forEach((l) => this.schedule(l));
        else this.clearLoops();
      }
    } catch (err) {
      this.log.warn({ err }, 'leader election failed');
      if (this.leader) {
        this.leader = false;
        this.metrics.leader.set(0);
        this.clearLoops();
      }
    }
    return this.leader;
  }

  private schedule(loop: Loop): void {
    if (!this.runTimers || this.timers.has(loop.name)) return;
    const tick = async () => {
      await this.runLoop(loop);
      if (this.leader && !this.stopped) {
        const t = setTimeout(() => void tick(), loop.everyMs);
        t.unref();
        this.timers.set(loop.name, t);
      }
    };
    const t = setTimeout(() => void tick(), 0);
    t.unref();
    this.timers.set(loop.name, t);
  }

  private async runLoop(loop: Loop): Promise<void> {
    try {
      // The turn's synchronous part runs on the main thread before the first await: a stall suspect.
      const t0 = stallTrace.enabled ? performance.now() : 0;
      const running = loop.run();
      stallTrace.span(`leader_${loop.name}`, t0);
      await running;
      this.metrics.jobRuns.inc({ job: loop.name, outcome: 'ok' });
    } catch (err) {
      this.metrics.jobRuns.inc({ job: loop.name, outcome: 'error' });
      this.log.error({ err, job: loop.name }, 'background loop failed');
    }
  }

  /** Runs every loop once, now, if this process leads. Returns whether it did. */
  async runAllOnce(): Promise<boolean> {
    if (!this.leader) return false;
    for (const l of this.loops) await this.runLoop(l);
    return true;
  }

  private clearLoops(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.electTimer) clearTimeout(this.electTimer);
    this.clearLoops();
    this.leader = false;
    this.metrics.leader.set(0);
    await this.lock.release();
  }
}
