import type { FastifyBaseLogger } from 'fastify';
import { ServiceError, type JobFinish, type JobOutput } from '@svc/shared';
import type { JobClaims, AgentReport, Origin } from './claims.ts';
import { older, type Pending, type PendingJobs } from './pending-jobs.ts';
import type { RelayedJobs } from './relayed-jobs.ts';

export interface AgentReportsDeps {
  jobs: PendingJobs;
  /** Jobs of other processes relayed to agents on this process's channels (with a relay). */
  relayed: RelayedJobs | null;
  /** Jobs of other processes whose agent reconnected here mid-job (with a relay). */
  claims: JobClaims | null;
  log: () => Pick<FastifyBaseLogger, 'info'>;
  /** The agent reported the job on this process's own channel, on `connection` (AgentHub.onOwnChannel). */
  ownChannel: (p: Pending, connection: number | null) => void;
}

/**
 * What agents report on this process's channels, outputs and finishes, routed to where the job is followed:
 * a job of this process (PendingJobs), a job relayed here for another process (RelayedJobs, sent back to its
 * origin), or a job this process does not know yet, looked up and claimed for its origin (JobClaims).
 */
export class AgentReports {
  /** Messages of outputs agents sent on this process's channels (one carries one output or several, in order). */
  outputMessages = 0;

  constructor(private readonly d: AgentReportsDeps) {}

  /**
   * One message of outputs from an agent. Resolves when the jobs' consumers can take more (the message's
   * answer waits for it, and the agent sends that job's next outputs after the answer).
   */
  async outputs(nodeId: string, outputs: JobOutput[], connection: number | null): Promise<void> {
    this.outputMessages++;
    const waits: Array<Promise<void>> = [];
    for (const os of byJob(outputs)) {
      const wait = this.jobOutputs(nodeId, os, connection);
      if (wait) waits.push(wait);
    }
    await Promise.all(waits);
  }

  /** Outputs of one job: for a job of this process, or relayed to its origin (in one write). */
  private jobOutputs(nodeId: string, os: JobOutput[], connection: number | null): Promise<void> | undefined {
    const p = this.d.jobs.get(os[0]!.job_id);
    if (p && p.nodeId === nodeId) {
      if (!older(p, connection)) this.d.ownChannel(p, connection);
      let wait: void | Promise<void> | undefined;
      for (const o of os) wait = this.d.jobs.output(p, o) ?? wait; // the last one waits for the consumer's room
      return wait ?? undefined;
    }
    const relayed = this.d.relayed?.outputs(nodeId, os, connection);
    if (relayed) return relayed;
    for (const o of os) void this.claim(nodeId, o.job_id, { t: 'output', o }, connection);
    return undefined;
  }

  /** A finish from an agent (routed as outputs are). */
  async finish(nodeId: string, f: JobFinish, connection: number | null): Promise<void> {
    const p = this.d.jobs.get(f.job_id);
    if (p && p.nodeId === nodeId) {
      if (!older(p, connection)) this.d.ownChannel(p, connection);
      return this.d.jobs.finish(p, f);
    }
    if (this.d.relayed?.finish(nodeId, f, connection)) return;
    const origin = await this.claim(nodeId, f.job_id, { t: 'finish', f }, connection);
    if (typeof origin === 'string') return; // relayed to its origin
    // Not known whose it is (the lookup failed): the agent delivers the finish again.
    if (origin === undefined) throw new ServiceError('unavailable', `could not look up job ${f.job_id}; send its finish again`);
    // A job already ended (canceled, timed out): the node confirms it stopped; its outcome is recorded.
    this.d.log().info({ job_id: f.job_id, node_id: nodeId, ok: f.ok, error: f.error }, 'finish for a job no longer open');
  }

  /** A job of another process run by an agent on this process's channel: relayed to its origin from here on (see JobClaims). */
  private claim(nodeId: string, jobId: string, report: AgentReport, connection: number | null): Promise<Origin> {
    return this.d.claims?.claim(nodeId, jobId, report, connection) ?? Promise.resolve(null);
  }
}

/** Consecutive outputs of the same job, in order (an agent sends one job's outputs per message; this does not rely on it). */
function byJob(outputs: JobOutput[]): JobOutput[][] {
  const runs: JobOutput[][] = [];
  for (const o of outputs) {
    const last = runs.at(-1);
    if (last && last[0]!.job_id === o.job_id) last.push(o);
    else runs.push([o]);
  }
  return runs;
}
