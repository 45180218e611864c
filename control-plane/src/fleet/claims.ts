import type { Kysely } from 'kysely';
import type { JobFinish, JobOutput } from '@svc/shared';
import type { DB } from '../db/schema.ts';
import type { RelayedJobs } from './relayed-jobs.ts';
import { older } from './pending-jobs.ts';

export type AgentReport = { t: 'output'; o: JobOutput } | { t: 'finish'; f: JobFinish };

/** A job's origin process; null: nobody's; undefined: not known (the lookup failed; the hub asks again). */
export type Origin = string | null | undefined;

interface Claim {
  nodeId: string;
  /** The agent's number for the connection that reported the job (told to the origin with `moved`). */
  connection: number | null;
  /** The agent's output and finish for the job that arrived while its origin was being looked up, in order. */
  held: AgentReport[];
  origin: Promise<Origin>;
  /** A channel of the node this claim's connection does not outlive detached during the lookup. */
  gone?: boolean;
}

/** Jobs remembered as nobody's, so late output of a cancelled job does not query the database per chunk. */
const ORPHANS_KEPT = 1000;
/** A job's origin that could not be looked up is looked up again this often, this many times, while its agent stays. */
const RETRY_MS = 2000;
const ATTEMPTS = 5;

/** What the claims need of the hub. */
export interface ClaimHost {
  /** The node's channel is on this process now. */
  attached(nodeId: string): boolean;
  /** The agent's number for the connection of the node's channel here (null: not numbered; undefined: none here). */
  connection(nodeId: string): number | null | undefined;
  /** This process dispatched or relays the job already. */
  known(jobId: string): boolean;
  /** Cancels a job nobody owns on the node's agent. */
  cancel(nodeId: string, jobId: string): void;
}

/**
 * Jobs run by an agent on this process's channel that this process neither dispatched nor relays: the agent
 * reconnected here mid-job, away from the process that held its channel before. `jobs.origin_process` names
 * the job's origin; while it is looked up, the agent's output and finish for the job wait here, and once it is
 * known the hub relays the job to its origin from here on (RelayedJobs.claim), held reports first.
 */
export class JobClaims {
  private readonly claims = new Map<string, Claim>();
  private readonly orphans = new Set<string>();
  /** How many times each node's channel detached from this process (a claim started before one does not take the job). */
  private readonly detaches = new Map<string, number>();

  constructor(
    private readonly db: Kysely<DB>,
    /** This process (`Database.processId`). */
    private readonly self: string,
    private readonly relayed: RelayedJobs,
    private readonly host: ClaimHost,
  ) {}

  /**
   * The jobs an agent says it runs (hello) that this process does not know: each claimed; returns those nobody
   * owns (to cancel). One whose lookup failed is looked up again while the agent stays (a quiet job sends no
   * report that would ask again).
   */
  async running(nodeId: string, jobIds: string[], connection: number | null = null): Promise<string[]> {
    const origins = await Promise.all(jobIds.map((id) => this.claim(nodeId, id, undefined, connection)));
    jobIds.filter((_, i) => origins[i] === undefined).forEach((id) => this.later(nodeId, id, 1, connection));
    return jobIds.filter((_, i) => origins[i] === null);
  }

  private later(nodeId: string, jobId: string, attempt: number, connection: number | null): void {
    const detaches = this.detachesOf(nodeId);
    setTimeout(() => {
      if (!this.host.attached(nodeId) || this.detachesOf(nodeId) !== detaches || this.host.known(jobId)) return;
      void this.claim(nodeId, jobId, undefined, connection).then((origin) => {
        if (origin === null) this.host.cancel(nodeId, jobId);
        else if (origin === undefined && attempt < ATTEMPTS) this.later(nodeId, jobId, attempt + 1, connection);
      });
    }, RETRY_MS).unref();
  }

  private detachesOf(nodeId: string): number {
    return this.detaches.get(nodeId) ?? 0;
  }

  /**
   * Makes this process the holder of a job of another process that the agent on its channel runs: once its
   * origin is known (`jobs.origin_process`: another process whose job is still open), the job is relayed to it
   * from here on, with the reports held meanwhile. Resolves with the origin; null when the job is nobody's
   * (ended, unknown, on another node, or this process's own and no longer open); undefined when the lookup
   * failed. `report`: the agent's output or finish that asked; `connection`: the agent's number for the
   * connection it came on.
   */
  claim(nodeId: string, jobId: string, report?: AgentReport, connection: number | null = null): Promise<Origin> {
    if (this.orphans.has(jobId)) return Promise.resolve(null);
    const open = this.claims.get(jobId);
    if (open) {
      if (open.nodeId === nodeId) {
        if (report) open.held.push(report);
        // The agent's later connection here (it left and came back during the lookup, without a detach: the
        // new channel replaced the old one) is the one the origin is to follow.
        if (connection !== null && (open.connection === null || connection > open.connection)) open.connection = connection;
      }
      return open.origin;
    }
    const claim: Claim = { nodeId, connection, held: report ? [report] : [], origin: Promise.resolve(null) };
    const done = () => this.claims.get(jobId) === claim && this.claims.delete(jobId);
    claim.origin = this.lookUp(nodeId, jobId).then(
      (origin) => {
        done();
        if (origin === null) this.orphan(jobId);
        else this.take(origin, jobId, claim);
        return origin;
      },
      () => {
        done();
        return undefined;
      },
    );
    this.claims.set(jobId, claim);
    return claim.origin;
  }

  /**
   * Relays the job from here on, the reports held meanwhile first. When the agent's channel detached from here
   * during the lookup, the process it is on now claims the job there (this one would relay for a channel it no
   * longer has, and the origin would follow it): only the reports it gave here are passed on. The origin is
   * told the latest connection that reported the job here, read now that the lookup answered.
   */
  private take(origin: string, jobId: string, { nodeId, connection, held, gone }: Claim): void {
    if (gone) {
      for (const r of held) this.relayed.tell(origin, r.t === 'output' ? { t: 'output', job: jobId, o: r.o } : { t: 'finish', job: jobId, f: r.f });
      return;
    }
    this.relayed.claim(origin, jobId, nodeId, connection);
    // Reported on a connection whose channel is not here (yet): its hello came before its channel, and an older
    // channel's end was spared it. It waits in the grace, like a job whose channel dropped, until that channel
    // attaches (RelayedJobs.attached) or the agent says hello with it again.
    if (connection !== null && this.host.connection(nodeId) !== connection) this.relayed.away(jobId);
    for (const r of held) {
      if (r.t === 'output') void this.relayed.outputs(nodeId, [r.o], connection);
      else this.relayed.finish(nodeId, r.f, connection);
    }
  }

  /**
   * The node's channel detached (`connection`: its number): a lookup still running for it is left to finish
   * alone (a new report or hello starts another), except one reported on a later connection of the agent (its
   * hello came before its channel), which that channel's end does not concern.
   */
  detached(nodeId: string, connection: number | null = null): void {
    this.detaches.set(nodeId, this.detachesOf(nodeId) + 1);
    for (const [jobId, c] of this.claims) {
      if (c.nodeId !== nodeId || older(c, connection)) continue;
      c.gone = true;
      this.claims.delete(jobId);
    }
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
