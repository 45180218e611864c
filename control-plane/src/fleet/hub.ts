import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { ServiceError, newId, type Clock, type JobFinish, type JobOutput, type ServerMessage } from '@svc/shared';
import type { DB } from '../db/schema.ts';
import { AsyncQueue } from './queue.ts';
import type { JobOutcome, NodeRegistry } from './registry.ts';
import { pickNode } from './scheduler.ts';

export interface JobSpec {
  /** The job kind the agent runs, e.g. `sandbox.run`, `diag.echo`. */
  kind: string;
  /** Which kind of node may run it; omitted: any node (diagnostics). */
  nodeKind?: 'sandbox' | 'inference' | undefined;
  payload: unknown;
  timeoutMs: number;
  accountId?: string | undefined;
  model?: string | undefined;
  /** Dispatch to this node only (a session that lives on one node, say). */
  nodeId?: string | undefined;
  /** May the job run again elsewhere if its node drops before it produced output? */
  retryable?: boolean;
  onOutput?: (o: JobOutput) => void;
  signal?: AbortSignal | undefined;
}

export interface JobResult {
  jobId: string;
  nodeId: string;
  result: unknown;
  durationMs: number;
  workUnits: number | undefined;
}

interface Conn {
  nodeId: string;
  queue: AsyncQueue<ServerMessage>;
}

interface Pending {
  jobId: string;
  nodeId: string;
  spec: JobSpec;
  sentAt: number;
  gotOutput: boolean;
  timer: NodeJS.Timeout;
  lostTimer?: NodeJS.Timeout;
  resolve(r: JobResult): void;
  reject(e: unknown): void;
}

class NodeLost extends Error {}

/**
 * The agent hub: live channels of the agents connected to this process, and the dispatch primitive.
 * dispatch() picks a node (scheduler), records the job, pushes it over the channel, streams output back
 * and resolves on finish; it cancels on timeout or when the caller aborts.
 *
 * Node-drop rule: if a node's channel drops, its jobs wait `reconnectGraceMs` (30 s) for the agent to come
 * back and report them in `hello(running_jobs)`; those carry on. A job not reported (or not back in time)
 * is lost: lost before any output, it is dispatched once more on another node (unless `retryable: false`,
 * pinned to a node, or already a retry); lost after output started, it is never re-run (the caller has
 * seen part of it) and fails 502 `upstream_error` with `reason: "node_lost"` and its `job_id`.
 *
 * Outcomes (registry.recordOutcome): a finish the agent reports counts succeeded or failed and gives a
 * latency sample; a lost job and a job the control plane times out count failed; a cancel by the caller
 * (spec.signal) counts neither way. Every attempt and its end is recorded in `jobs`, so nothing is lost silently.
 */
export class AgentHub {
  private readonly conns = new Map<string, Conn>();
  private readonly pending = new Map<string, Pending>();

  /** Set to the app's logger once it exists; silent until then. */
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'> = { info: () => undefined, warn: () => undefined, error: () => undefined };

  constructor(
    private readonly registry: NodeRegistry,
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly reconnectGraceMs = 30_000,
  ) {}

  isConnected(nodeId: string): boolean {
    return this.conns.has(nodeId);
  }

  attach(nodeId: string): Conn {
    this.conns.get(nodeId)?.queue.close();
    const conn = { nodeId, queue: new AsyncQueue<ServerMessage>() };
    this.conns.set(nodeId, conn);
    this.log.info({ node_id: nodeId }, 'agent channel attached');
    return conn;
  }

  detach(conn: Conn): void {
    if (this.conns.get(conn.nodeId) !== conn) return;
    this.conns.delete(conn.nodeId);
    this.log.info({ node_id: conn.nodeId }, 'agent channel detached');
    for (const p of this.pending.values()) {
      if (p.nodeId === conn.nodeId && !p.lostTimer) {
        p.lostTimer = setTimeout(() => this.lose(p), this.reconnectGraceMs);
        p.lostTimer.unref();
      }
    }
  }

  /** On (re)connect the agent says what it still runs: those jobs carry on, the rest of ours are lost, its orphans are cancelled. */
  hello(nodeId: string, running: string[]): { cancelled: string[] } {
    const still = new Set(running);
    for (const p of [...this.pending.values()]) {
      if (p.nodeId !== nodeId) continue;
      if (still.has(p.jobId)) {
        if (p.lostTimer) clearTimeout(p.lostTimer);
        p.lostTimer = undefined;
      } else if (p.lostTimer) {
        clearTimeout(p.lostTimer);
        this.lose(p);
      }
    }
    const orphans = running.filter((id) => !this.pending.has(id));
    for (const id of orphans) this.conns.get(nodeId)?.queue.push({ type: 'cancel', job_id: id, reason: 'the control plane no longer tracks this job' });
    return { cancelled: orphans };
  }

  async dispatch(spec: JobSpec, exclude: string[] = []): Promise<JobResult> {
    const now = this.clock.now();
    const nodes = (await this.registry.snapshots()).filter((n) => this.conns.has(n.id) && (!spec.nodeId || n.id === spec.nodeId));
    const node = pickNode(nodes, { kind: spec.nodeKind, model: spec.model, exclude, allowDraining: spec.nodeId !== undefined }, now);
    if (!node) {
      throw new ServiceError('no_capacity', `No eligible ${spec.nodeKind ?? ''} node is available for ${spec.kind}${spec.model ? ` for model ${spec.model}` : ''}; retry shortly`, { retryable: true, retry_after: 5 });
    }
    const jobId = newId('job_', 20);
    await this.db
      .insertInto('jobs')
      .values({ id: jobId, node_id: node.id, account_id: spec.accountId ?? null, kind: spec.kind, status: 'dispatched', attempts: exclude.length + 1, error: null, created_at: now, dispatched_at: now, ended_at: null })
      .execute();
    try {
      return await this.run(jobId, node.id, spec);
    } catch (e) {
      if (e instanceof NodeLost && spec.retryable !== false && exclude.length === 0 && !spec.nodeId) {
        this.log.warn({ job_id: jobId, node_id: node.id }, 'node lost before output; dispatching once more elsewhere');
        return this.dispatch(spec, [node.id]);
      }
      if (e instanceof NodeLost) throw new ServiceError('upstream_error', `The node running this job went away (${e.message})`, { job_id: jobId, reason: 'node_lost' });
      throw e;
    }
  }

  private run(jobId: string, nodeId: string, spec: JobSpec): Promise<JobResult> {
    return new Promise<JobResult>((resolve, reject) => {
      // The agent enforces timeout_ms itself and reports timed_out; this is the backstop for an agent that never answers.
      const timer = setTimeout(() => {
        if (!this.pending.has(jobId)) return;
        this.cancel(jobId, 'timed out');
        void this.end(jobId, 'timed_out', 'timed out')
          .then(() => this.record(nodeId, spec, { outcome: 'failed', durationMs: spec.timeoutMs }))
          .catch((e: unknown) => this.log.error({ err: e, job_id: jobId }, 'could not end a timed-out job'))
          .finally(() => reject(new ServiceError('upstream_timeout', `Job timed out after ${spec.timeoutMs} ms`, { job_id: jobId })));
      }, spec.timeoutMs + 5_000);
      timer.unref();
      const p: Pending = { jobId, nodeId, spec, sentAt: performance.now(), gotOutput: false, timer, resolve, reject };
      this.pending.set(jobId, p);
      this.conns.get(nodeId)!.queue.push({ type: 'job', job_id: jobId, kind: spec.kind, payload: spec.payload, timeout_ms: spec.timeoutMs });
      const onAbort = () => {
        if (!this.pending.has(jobId)) return;
        this.cancel(jobId, 'caller went away');
        void this.end(jobId, 'canceled', 'caller went away')
          .then(() => this.record(nodeId, spec, { outcome: 'canceled', durationMs: performance.now() - p.sentAt }))
          .catch((e: unknown) => this.log.error({ err: e, job_id: jobId }, 'could not end a canceled job'))
          .finally(() => reject(new ServiceError('conflict', 'Job canceled')));
      };
      if (spec.signal?.aborted) onAbort();
      else spec.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  cancel(jobId: string, reason: string): void {
    const p = this.pending.get(jobId);
    if (!p) return;
    this.conns.get(p.nodeId)?.queue.push({ type: 'cancel', job_id: jobId, reason });
  }

  onOutput(nodeId: string, o: JobOutput): void {
    const p = this.pending.get(o.job_id);
    if (!p || p.nodeId !== nodeId) return;
    p.gotOutput = true;
    p.spec.onOutput?.(o);
  }

  async onFinish(nodeId: string, f: JobFinish): Promise<void> {
    const p = this.pending.get(f.job_id);
    if (!p || p.nodeId !== nodeId) {
      // A job already ended here (canceled, timed out): the node confirms it stopped; its outcome is recorded.
      this.log.info({ job_id: f.job_id, node_id: nodeId, ok: f.ok, error: f.error }, 'finish for a job no longer open');
      return;
    }
    const latencyMs = performance.now() - p.sentAt;
    await this.end(f.job_id, f.ok ? 'succeeded' : f.timed_out ? 'timed_out' : 'failed', f.error ?? null);
    await this.record(nodeId, p.spec, { outcome: f.ok ? 'succeeded' : 'failed', latencyMs, workUnits: f.work_units, durationMs: f.duration_ms });
    if (f.ok) p.resolve({ jobId: f.job_id, nodeId, result: f.result, durationMs: f.duration_ms, workUnits: f.work_units });
    else if (f.timed_out) p.reject(new ServiceError('upstream_timeout', `Job timed out after ${p.spec.timeoutMs} ms`, { job_id: f.job_id }));
    else p.reject(new ServiceError('upstream_error', f.error ?? 'job failed on its node', { job_id: f.job_id }));
  }

  private lose(p: Pending): void {
    if (!this.pending.has(p.jobId)) return;
    const retry = !p.gotOutput;
    const ended = this.end(p.jobId, 'failed', 'node lost')
      .then(() => this.record(p.nodeId, p.spec, { outcome: 'failed', durationMs: performance.now() - p.sentAt }))
      .catch((e: unknown) => this.log.error({ err: e, job_id: p.jobId }, 'could not end a lost job'));
    void ended.finally(() =>
      p.reject(retry ? new NodeLost(`node ${p.nodeId} dropped`) : new ServiceError('upstream_error', `Node ${p.nodeId} dropped after its output began; not re-run`, { job_id: p.jobId, reason: 'node_lost' })),
    );
  }

  private async record(nodeId: string, spec: JobSpec, o: { outcome: JobOutcome; latencyMs?: number; workUnits?: number | undefined; durationMs: number }): Promise<void> {
    await this.registry.recordOutcome(nodeId, { ...o, kind: spec.nodeKind ?? spec.kind }).catch((e: unknown) => this.log.error({ err: e, node_id: nodeId }, 'could not record a job outcome'));
  }

  private async end(jobId: string, status: 'succeeded' | 'failed' | 'canceled' | 'timed_out', error: string | null): Promise<void> {
    const p = this.pending.get(jobId);
    if (p) {
      clearTimeout(p.timer);
      if (p.lostTimer) clearTimeout(p.lostTimer);
      this.pending.delete(jobId);
    }
    await this.db.updateTable('jobs').set({ status, error, ended_at: this.clock.now() }).where('id', '=', jobId).where('ended_at', 'is', null).execute();
  }

  /** Jobs still open in this process (for status and tests). */
  openJobs(): Array<{ jobId: string; nodeId: string; kind: string }> {
    return [...this.pending.values()].map((p) => ({ jobId: p.jobId, nodeId: p.nodeId, kind: p.spec.kind }));
  }

  async close(): Promise<void> {
    for (const c of this.conns.values()) c.queue.close();
    for (const p of [...this.pending.values()]) {
      await this.end(p.jobId, 'failed', 'control plane shutting down');
      p.reject(new ServiceError('unavailable', 'The control plane is shutting down'));
    }
  }
}
