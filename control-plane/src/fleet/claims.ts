import type { Kysely } from 'kysely';
import type { JobFinish, JobOutput } from '@svc/shared';
import type { DB } from '../db/schema.ts';
import type { RelayedJobs } from './relayed-jobs.ts';

export type AgentReport = { t: 'output'; o: JobOutput } | { t: 'finish'; f: JobFinish };

interface Claim {
  nodeId: string;
  /** The agent's output and finish for the job that arrived while its origin was being looked up, in order. */
  held: AgentReport[];
  origin: Promise<string | null>;
}

/** Jobs remembered as nobody's, so late output of a cancelled job does not query the database per chunk. */
const ORPHANS_KEPT = 1000;

/**
 * Jobs run by an agent on this process's channel that this process neither dispatched nor relays: the agent
 * reconnected here mid-job, away from the process that held its channel before. `jobs.origin_process` names
 * the job's origin; while it is looked up, the agent's output and finish for the job wait here, and once it is
 * known the hub relays the job to its origin from here on (RelayedJobs.claim), held reports first.
 */
export class JobClaims {
  private readonly claims = new Map<string, Claim>();
  private readonly orphans = new Set<string>();

  constructor(
    private readonly db: Kysely<DB>,
    /** This process (`Database.processId`). */
    private readonly self: string,
    private readonly relayed: RelayedJobs,
  ) {}

  /**
   * Makes this process the holder of a job of another process that the agent on its channel runs: once its
   * origin is known, the job is relayed to it from here on, with the reports held meanwhile. Resolves with the
   * origin, or null when the job is nobody's. `report`: the agent's output or finish that asked.
   */
  claim(nodeId: string, jobId: string, report?: AgentReport): Promise<string | null> {
    return this.originOf(
      nodeId,
      jobId,
      (origin, held) => {
        if (origin === null) return;
        this.relayed.claim(origin, jobId, nodeId);
        for (const r of held) {
          if (r.t === 'output') this.relayed.output(nodeId, r.o);
          else this.relayed.finish(nodeId, r.f);
        }
      },
      report,
    );
  }

  /**
   * The origin of a job running on `nodeId`, once looked up: another process whose job is still open; null when
   * the job is nobody's (ended, unknown, on another node, this process's own and no longer open, or the lookup failed).
   * `report`: an output or finish of the agent to hold until then. `settle` runs once per lookup, before any
   * later caller sees the answer, with the reports held meanwhile.
   */
  private originOf(nodeId: string, jobId: string, settle: (origin: string | null, held: AgentReport[]) => void, report?: AgentReport): Promise<string | null> {
    if (this.orphans.has(jobId)) return Promise.resolve(null);
    const open = this.claims.get(jobId);
    if (open) {
      if (report) open.held.push(report);
      return open.origin;
    }
    const claim: Claim = { nodeId, held: report ? [report] : [], origin: Promise.resolve(null) };
    claim.origin = this.lookUp(nodeId, jobId).catch(() => null).then((origin) => {
      this.claims.delete(jobId);
      if (origin === null) this.orphan(jobId);
      settle(origin, claim.held);
      return origin;
    });
    this.claims.set(jobId, claim);
    return claim.origin;
  }

  private async lookUp(nodeId: string, jobId: string): Promise<string | null> {
    const row = await this.db.selectFrom('jobs').select(['node_id', 'origin_process', 'ended_at']).where('id', '=', jobId).executeTakeFirst();
    if (!row || row.ended_at !== null || row.node_id !== nodeId || !row.origin_process || row.origin_process === this.self) return null;
    return row.origin_process;
  }

  private orphan(jobId: string): void {
    if (this.orphans.size >= ORPHANS_KEPT) this.orphans.delete(this.orphans.values().next().value!);
    this.orphans.add(jobId);
  }
}
