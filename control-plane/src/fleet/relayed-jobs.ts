import type { FastifyBaseLogger } from 'fastify';
import type { JobFinish, JobOutput, ServerMessage } from '@svc/shared';
import type { FleetRelay, RelayMessage } from './relay.ts';

interface Relayed {
  origin: string;
  nodeId: string;
  lostTimer?: NodeJS.Timeout;
}

/**
 * The holder's side of the relay: jobs other processes (their origins) dispatched to nodes whose channel
 * this process holds. It passes each job to its agent, relays the agent's output and finish back, and
 * applies the node-drop rule to the channel it holds (`lost` once the grace ran out); the origin keeps the
 * job's record, timers and outcome (AgentHub).
 */
export class RelayedJobs {
  private readonly jobs = new Map<string, Relayed>();

  constructor(
    private readonly relay: FleetRelay,
    /** Pushes a message onto a node's channel held here; false when this process holds no channel of it. */
    private readonly push: (nodeId: string, m: ServerMessage) => boolean,
    private readonly log: () => Pick<FastifyBaseLogger, 'error'>,
    private readonly graceMs: number,
  ) {}

  has(jobId: string): boolean {
    return this.jobs.has(jobId);
  }

  tell(to: string, m: RelayMessage): void {
    this.relay.send(to, m).catch((e: unknown) => this.log().error({ err: e, job_id: m.job, to }, 'could not send a relay message'));
  }

  /** A job for a node whose channel the origin believes this process holds (`known`: this id is a job of ours). */
  take(origin: string, m: Extract<RelayMessage, { t: 'job' }>, known: boolean): void {
    if (known || this.jobs.has(m.job) || !this.push(m.node, { type: 'job', job_id: m.job, kind: m.kind, payload: m.payload, timeout_ms: m.timeout_ms })) {
      this.tell(origin, { t: 'refused', job: m.job, why: `the channel of node ${m.node} is not held here any more` });
      return;
    }
    this.jobs.set(m.job, { origin, nodeId: m.node });
    this.tell(origin, { t: 'accepted', job: m.job });
  }

  cancel(from: string, jobId: string, reason: string): void {
    const r = this.jobs.get(jobId);
    if (r && r.origin === from) this.push(r.nodeId, { type: 'cancel', job_id: jobId, reason });
  }

  /** Output from the agent: relayed when the job is one of these; false when it is not. */
  output(nodeId: string, o: JobOutput): boolean {
    const r = this.jobs.get(o.job_id);
    if (!r || r.nodeId !== nodeId) return false;
    this.tell(r.origin, { t: 'output', job: o.job_id, o });
    return true;
  }

  /** The agent's finish: relayed, and the job forgotten here; false when it is not one of these. */
  finish(nodeId: string, f: JobFinish): boolean {
    const r = this.jobs.get(f.job_id);
    if (!r || r.nodeId !== nodeId) return false;
    this.forget(f.job_id);
    this.tell(r.origin, { t: 'finish', job: f.job_id, f });
    return true;
  }

  /** The node's channel dropped: its jobs wait the grace for the agent to come back with them. */
  detached(nodeId: string): void {
    for (const [jobId, r] of this.jobs) {
      if (r.nodeId === nodeId && !r.lostTimer) {
        r.lostTimer = setTimeout(() => this.drop(jobId, `node ${r.nodeId} dropped`), this.graceMs);
        r.lostTimer.unref();
      }
    }
  }

  /** The agent came back: the jobs it still runs carry on, the others are lost. */
  hello(nodeId: string, still: ReadonlySet<string>): void {
    for (const [jobId, r] of [...this.jobs]) {
      if (r.nodeId !== nodeId) continue;
      if (still.has(jobId)) {
        if (r.lostTimer) clearTimeout(r.lostTimer);
        r.lostTimer = undefined;
      } else if (r.lostTimer) this.drop(jobId, `node ${nodeId} came back without the job`);
    }
  }

  origins(): string[] {
    return [...this.jobs.values()].map((r) => r.origin);
  }

  /** Jobs whose origin is gone are cancelled on their node. */
  originsGone(gone: ReadonlySet<string>): void {
    for (const [jobId, r] of [...this.jobs]) {
      if (!gone.has(r.origin)) continue;
      this.forget(jobId);
      this.push(r.nodeId, { type: 'cancel', job_id: jobId, reason: 'the control-plane process that dispatched this job is gone' });
    }
  }

  /** This process stops: not the node's fault, so its origin counts each job lost without holding it against the node. */
  close(): void {
    for (const [jobId, r] of [...this.jobs]) {
      this.forget(jobId);
      this.tell(r.origin, { t: 'refused', job: jobId, why: 'the control-plane process holding the node channel is shutting down' });
    }
  }

  list(): Array<{ jobId: string; nodeId: string; origin: string }> {
    return [...this.jobs].map(([jobId, r]) => ({ jobId, nodeId: r.nodeId, origin: r.origin }));
  }

  private forget(jobId: string): Relayed | undefined {
    const r = this.jobs.get(jobId);
    if (r?.lostTimer) clearTimeout(r.lostTimer);
    this.jobs.delete(jobId);
    return r;
  }

  /** The node dropped and did not come back with the job: its origin applies the node-drop rule. */
  private drop(jobId: string, why: string): void {
    const r = this.forget(jobId);
    if (r) this.tell(r.origin, { t: 'lost', job: jobId, why });
  }
}
