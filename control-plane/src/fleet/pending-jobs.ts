import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { ServiceError, type Clock, type JobFinish, type JobOutput } from '@svc/shared';
import type { DB } from '../db/schema.ts';
import type { JobResult, JobSpec } from './job-spec.ts';
import type { JobOutcome, NodeRegistry } from './registry.ts';

/** A job this process dispatched and still waits for. */
export interface Pending {
  jobId: string;
  nodeId: string;
  spec: JobSpec;
  sentAt: number;
  gotOutput: boolean;
  timer: NodeJS.Timeout;
  /** The backstop of the spec's idle limit (see add), restarted by each output. */
  idleTimer?: NodeJS.Timeout;
  /** Outputs whose consumer holds the agent back (the backstop starts over while there are any). */
  held?: number;
  /** The process last told to `hold` the job's relayed outputs (RemoteJobs.holdBack). */
  heldAt?: string;
  /** Some output of the job was held back by its consumer: its times say more about the caller than the node. */
  heldBack?: boolean;
  /** Its caller went away and it was canceled on its node; followed until the node reports its end (JobSpec.cancelGraceMs). */
  canceled?: boolean;
  /** The reconnect grace: the job is lost when it runs out. */
  lostTimer?: NodeJS.Timeout;
  /** The process holding the node's channel, when another process does (the job goes through the relay). */
  holder?: string;
  /**
   * The last output seq delivered. Output and finish are taken from whichever process relays them (one the
   * agent left may still have some in flight); an output is delivered at most once and never after a later
   * one (one overtaken by a later output is dropped).
   */
  lastSeq: number;
  /** Until the holder says it passed the job on. */
  ackTimer?: NodeJS.Timeout;
  /**
   * The agent's number for the connection the job is on, as far as this process knows (null: not known, or an
   * agent that does not number them). A report of an older connection (a `moved` that took longer than a later
   * one, output from a connection the agent already left) does not take the job back to it.
   */
  connection: number | null;
  resolve(r: JobResult): void;
  reject(e: unknown): void;
}

/** A job lost before its output began (dispatched once more elsewhere where it may be). */
export class NodeLost extends Error {}

/** Whether `connection` is older than the one a job is known on (both numbered); for this process's jobs and the ones it relays or claims. */
export const older = (p: { connection: number | null }, connection: number | null): boolean => connection !== null && p.connection !== null && connection < p.connection;
/** Whether `connection` is later than the one a job is known on (both numbered). */
export const later = (p: { connection: number | null }, connection: number | null): boolean => connection !== null && p.connection !== null && connection > p.connection;

export interface PendingJobsDeps {
  db: Kysely<DB>;
  clock: Clock;
  registry: NodeRegistry;
  log: () => Pick<FastifyBaseLogger, 'error'>;
  reconnectGraceMs: number;
  /** Times a job's round trip (its latency sample and duration), in ms. */
  stopwatch: Stopwatch;
  /** Tells the job's node (or the process holding its channel) to stop it. */
  cancel(jobId: string, why: string): void;
}

/**
 * A monotonic clock in ms (`performance.now()`), apart from the injected wall clock: a round trip is not a
 * date. Tests set `now` to make the latency samples exact.
 */
export interface Stopwatch {
  now: () => number;
}

/**
 * The jobs this process dispatched and still waits for, and how each ends: finished by its agent, lost (the
 * node-drop rule's grace), or ended by its caller, its time limit or shutdown. Every end is written to `jobs`;
 * a finish and a loss the node is to blame for are recorded against the node.
 */
export class PendingJobs {
  private readonly jobs = new Map<string, Pending>();

  constructor(private readonly d: PendingJobsDeps) {}

  get(jobId: string): Pending | undefined {
    return this.jobs.get(jobId);
  }

  has(jobId: string): boolean {
    return this.jobs.has(jobId);
  }

  add(p: Pending): void {
    this.jobs.set(p.jobId, p);
    // The agent enforces a spec's idle limit; this backstop (5 s later, restarted by each output) covers an agent,
    // or a relaying process, from before it. Time a slow consumer holds the agent back does not count.
    const idle = p.spec.idleTimeoutMs;
    if (!idle) return;
    p.idleTimer = setTimeout(() => {
      if (!this.jobs.has(p.jobId)) return;
      if (p.held) return void p.idleTimer?.refresh();
      this.d.cancel(p.jobId, 'timed out');
      this.fail(p, 'timed_out', 'timed out', { outcome: 'failed', durationMs: this.d.stopwatch.now() - p.sentAt }, new ServiceError('upstream_timeout', `Job had no output for ${idle} ms`, { job_id: p.jobId }));
    }, idle + 5_000);
    p.idleTimer.unref();
  }

  /** A copy: ending jobs while going through them is fine. */
  all(): Pending[] {
    return [...this.jobs.values()];
  }

  /** The job's agent was heard of again (back on a channel, or its holder answered): the grace stops. */
  endGrace(p: Pending): void {
    clearTimeout(p.lostTimer);
    p.lostTimer = undefined;
  }

  /**
   * The node-drop rule's wait: the job is lost unless its agent comes back with it in time, here (`hello`) or on
   * another process (`moved`). `counts`: against the node when the grace runs out (its channel dropped; not when
   * the process relaying it left).
   */
  grace(p: Pending, why: string, counts: boolean): void {
    if (p.lostTimer) return;
    p.lostTimer = setTimeout(() => {
      p.lostTimer = undefined;
      if (p.holder) this.d.cancel(p.jobId, why); // in case the holder still has it after all: the job must not run unowned
      this.lose(p, why, counts);
    }, this.d.reconnectGraceMs);
    p.lostTimer.unref();
  }

  /** Delivers an output; a promise when its consumer asks the agent to wait before sending more. */
  output(p: Pending, o: JobOutput): void | Promise<void> {
    if (o.seq <= p.lastSeq) return; // delivered already (through the process the agent was on before), or overtaken
    p.lastSeq = o.seq;
    p.gotOutput = true;
    p.idleTimer?.refresh();
    const wait = p.spec.onOutput?.(o);
    if (!(wait instanceof Promise)) return undefined;
    // Held back by its consumer (a slow caller): the idle backstop does not count that time.
    p.held = (p.held ?? 0) + 1;
    p.heldBack = true;
    return wait.finally(() => {
      p.held = (p.held ?? 1) - 1;
      p.idleTimer?.refresh();
    });
  }

  async finish(p: Pending, f: JobFinish): Promise<void> {
    const nodeId = p.nodeId;
    // A job a slow caller held back gives no latency or speed sample: how long it took is partly the caller's
    // time, and how much of it is cannot be told (the node may go on generating while it waits). Its outcome counts.
    const sample = !p.heldBack;
    const latencyMs = sample ? this.d.stopwatch.now() - p.sentAt : undefined;
    const failed = f.ok ? (p.spec.failedResult?.(f.result) ?? null) : null; // a result that reports a failure counts as one
    if (p.canceled) {
      // Stopped because its caller left: says nothing about the node either way (as a cancel that does not wait).
      await this.end(f.job_id, 'canceled', 'caller went away');
      await this.record(nodeId, p.spec, { outcome: 'canceled', durationMs: f.duration_ms });
    } else {
      await this.end(f.job_id, f.ok && !failed ? 'succeeded' : f.timed_out ? 'timed_out' : 'failed', failed ?? f.error ?? null);
      await this.record(nodeId, p.spec, { outcome: f.ok && !failed ? 'succeeded' : 'failed', latencyMs, workUnits: sample ? f.work_units : undefined, durationMs: f.duration_ms });
    }
    if (f.ok) p.resolve({ jobId: f.job_id, nodeId, result: f.result, durationMs: f.duration_ms, workUnits: f.work_units });
    else if (f.timed_out) p.reject(new ServiceError('upstream_timeout', f.error?.startsWith('no output') ? `Job had ${f.error}` : `Job timed out after ${p.spec.timeoutMs} ms`, { job_id: f.job_id }));
    else p.reject(new ServiceError('upstream_error', f.error ?? 'job failed on its node', { job_id: f.job_id }));
  }

  /** The job is lost (`counts`: against its node, which dropped; not when a relaying process failed). */
  lose(p: Pending, why = `node ${p.nodeId} dropped`, counts = true): void {
    if (!this.jobs.has(p.jobId)) return;
    const err = p.gotOutput ? new ServiceError('upstream_error', `${why} after its output began; not re-run`, { job_id: p.jobId, reason: 'node_lost' }) : new NodeLost(why);
    this.fail(p, 'failed', 'node lost', counts ? { outcome: 'failed', durationMs: this.d.stopwatch.now() - p.sentAt } : null, err);
  }

  /**
   * Ends a job this process gave up on (lost, timed out, canceled by its caller): its record, its outcome
   * when it says something about the node, then its caller's error.
   */
  fail(p: Pending, status: 'failed' | 'canceled' | 'timed_out', error: string, outcome: { outcome: JobOutcome; durationMs: number } | null, err: Error): void {
    void this.end(p.jobId, status, error)
      .then(() => (outcome ? this.record(p.nodeId, p.spec, outcome) : undefined))
      .catch((e: unknown) => this.d.log().error({ err: e, job_id: p.jobId }, `could not end a job (${error})`))
      .finally(() => p.reject(err));
  }

  async record(nodeId: string, spec: JobSpec, o: { outcome: JobOutcome; latencyMs?: number; workUnits?: number | undefined; durationMs: number }): Promise<void> {
    await this.d.registry.recordOutcome(nodeId, { ...o, kind: spec.nodeKind ?? spec.kind }).catch((e: unknown) => this.d.log().error({ err: e, node_id: nodeId }, 'could not record a job outcome'));
  }

  /** Ends the job's record (and its timers, when it is still open here). */
  async end(jobId: string, status: 'succeeded' | 'failed' | 'canceled' | 'timed_out', error: string | null): Promise<void> {
    const p = this.jobs.get(jobId);
    if (p) {
      clearTimeout(p.timer);
      clearTimeout(p.idleTimer);
      if (p.lostTimer) clearTimeout(p.lostTimer);
      if (p.ackTimer) clearTimeout(p.ackTimer);
      this.jobs.delete(jobId);
    }
    await this.d.db.updateTable('jobs').set({ status, error, ended_at: this.d.clock.now() }).where('id', '=', jobId).where('ended_at', 'is', null).execute();
  }

  /** Jobs still open in this process (for status and tests). */
  list(): Array<{ jobId: string; nodeId: string; kind: string }> {
    return this.all().map((p) => ({ jobId: p.jobId, nodeId: p.nodeId, kind: p.spec.kind }));
  }
}
