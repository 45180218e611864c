import type { FastifyBaseLogger } from 'fastify';
import type { JobFinish, JobOutput, ServerMessage } from '@svc/shared';
import type { FleetRelay, RelayMessage } from './relay.ts';
import { later, older } from './pending-jobs.ts';

interface Relayed {
  origin: string;
  nodeId: string;
  /** The agent's number for the connection the job was pushed to or reported on here (null: not numbered). */
  connection: number | null;
  /** The channel dropped and the origin was told; forgotten after the grace unless the agent comes back here with it. */
  dropped?: NodeJS.Timeout;
  /** The origin said `hold` (its consumer takes no more for now): the agent's next outputs wait for its `go`. */
  held?: { until: Promise<void>; go: () => void };
}

/**
 * The holder's side of the relay: jobs other processes (their origins) dispatched to nodes whose channel
 * this process holds, or whose agent reconnected here mid-job (`claim`). It passes each job to its agent and
 * relays the agent's output and finish back. When the channel drops it tells the origin (`dropped`), which
 * applies the node-drop rule and keeps the job's record, timers and outcome (AgentHub); an agent back here
 * with the job makes this process its holder again (`moved`), one back without it, or not back within the
 * grace, makes it `lost`.
 */
export class RelayedJobs {
  private readonly jobs = new Map<string, Relayed>();

  constructor(
    private readonly relay: FleetRelay,
    /** Pushes a message onto a node's channel held here; false when this process holds no channel of it. */
    private readonly push: (nodeId: string, m: ServerMessage) => boolean,
    private readonly log: () => Pick<FastifyBaseLogger, 'error'>,
    private readonly graceMs: number,
    /** The agent's number for the node's connection held here (ConnectionParams.connection), or null: told with `accepted`. */
    private readonly connectionOf: (nodeId: string) => number | null = () => null,
    /** The latest connection of the node whose hello this process heard (-1: none numbered). */
    private readonly heard: (nodeId: string) => number = () => -1,
  ) {}

  has(jobId: string): boolean {
    return this.jobs.has(jobId);
  }

  tell(to: string, m: RelayMessage): void {
    this.relay.send(to, m).catch((e: unknown) => this.log().error({ err: e, job_id: m.job, to }, 'could not send a relay message'));
  }

  /** A job for a node whose channel the origin believes this process holds (`known`: this id is a job of ours). */
  take(origin: string, m: Extract<RelayMessage, { t: 'job' }>, known: boolean): void {
    if (known || this.jobs.has(m.job) || !this.push(m.node, { type: 'job', job_id: m.job, kind: m.kind, payload: m.payload, timeout_ms: m.timeout_ms, ...(m.idle_timeout_ms ? { idle_timeout_ms: m.idle_timeout_ms } : {}) })) {
      this.tell(origin, { t: 'refused', job: m.job, why: `the channel of node ${m.node} is not held here any more` });
      return;
    }
    const connection = this.connectionOf(m.node);
    this.jobs.set(m.job, { origin, nodeId: m.node, connection });
    this.tell(origin, { t: 'accepted', job: m.job, connection });
  }

  /**
   * A job of `origin` that the agent on this process's channel runs: relayed from here on, and the origin told
   * so, with the agent's number for the connection that reported it (the origin follows no connection older
   * than one it knows). That number comes with the report: the connection's hello can run before its channel
   * replaced an older one of the agent here.
   */
  claim(origin: string, jobId: string, nodeId: string, connection: number | null): void {
    this.forget(jobId);
    this.jobs.set(jobId, { origin, nodeId, connection });
    this.tell(origin, { t: 'moved', job: jobId, connection });
  }

  cancel(from: string, jobId: string, reason: string): void {
    const r = this.jobs.get(jobId);
    // An agent not connected here now learns of the cancel wherever it reconnects (the job is nobody's there).
    if (r && r.origin === from && !this.push(r.nodeId, { type: 'cancel', job_id: jobId, reason })) this.forget(jobId);
  }

  /** The origin's input for a job relayed here: passed on to the agent (dropped when the channel is not here now). */
  input(from: string, m: Extract<RelayMessage, { t: 'input' }>): void {
    const r = this.jobs.get(m.job);
    if (r && r.origin === from && !r.dropped) this.push(r.nodeId, { type: 'input', job_id: m.job, seq: m.seq, input: m.input });
  }

  /**
   * Outputs of one job from the agent, relayed in one write when the job is one of these (null when it is not).
   * The promise, which the answer to the agent waits for, resolves once they are written and the origin lets
   * the job go on (it said `hold`, and not yet `go`): the agent sends no more meanwhile, so neither this
   * process nor the origin queues a stream its caller is slow to read.
   */
  outputs(nodeId: string, os: JobOutput[], connection: number | null): Promise<void> | null {
    const jobId = os[0]!.job_id;
    const r = this.back(nodeId, jobId, connection);
    if (!r) return null;
    const written = this.relay.sendAll(r.origin, jobId, os.map((o) => ({ t: 'output', job: jobId, o }))).catch((e: unknown) => this.log().error({ err: e, job_id: jobId, to: r.origin }, 'could not send a relay message'));
    return r.held ? Promise.all([written, r.held.until]).then(() => undefined) : written;
  }

  /** The origin's `hold` or `go` for a job relayed here. */
  flow(from: string, jobId: string, hold: boolean): void {
    const r = this.jobs.get(jobId);
    if (!r || r.origin !== from) return;
    if (!hold) return this.go(r);
    if (r.held) return;
    let go!: () => void;
    const until = new Promise<void>((resolve) => (go = resolve));
    r.held = { until, go };
  }

  /** The agent's finish: relayed, and the job forgotten here; false when it is not one of these. */
  finish(nodeId: string, f: JobFinish, connection: number | null): boolean {
    const r = this.back(nodeId, f.job_id, connection);
    if (!r) return false;
    this.forget(f.job_id);
    this.tell(r.origin, { t: 'finish', job: f.job_id, f });
    return true;
  }

  /**
   * A channel of the node ended (`connection`: its number; `onlyItsOwn`: a channel a later one had replaced, whose
   * end concerns only the jobs pushed to it). A job pushed to it is lost at once when the agent already said
   * hello on a later connection (it had left this one, and its hello did not name the job); the others' origins
   * start the reconnect grace (which the agent's hello naming them, or the attach of the connection that
   * reported them, ends), and the jobs are remembered here for as long.
   */
  detached(nodeId: string, connection: number | null, onlyItsOwn = false): void {
    const left = connection !== null && this.heard(nodeId) > connection;
    for (const [jobId, r] of [...this.jobs]) {
      if (r.nodeId !== nodeId || r.dropped || (onlyItsOwn && r.connection !== connection)) continue;
      if (left && r.connection === connection) {
        this.forget(jobId);
        this.tell(r.origin, { t: 'lost', job: jobId, why: `node ${nodeId} reconnected without the job` });
        continue;
      }
      this.away(jobId);
    }
  }

  /**
   * The job's channel is not here (it dropped, or the connection that reported it has not attached yet): its
   * origin starts the reconnect grace and this process remembers the job for as long; then it is lost.
   */
  away(jobId: string): void {
    const r = this.jobs.get(jobId);
    if (!r || r.dropped) return;
    this.tell(r.origin, { t: 'dropped', job: jobId, why: `the channel of node ${r.nodeId} dropped`, counts: true });
    r.dropped = setTimeout(() => {
      this.forget(jobId);
      this.tell(r.origin, { t: 'lost', job: jobId, why: `node ${r.nodeId} dropped and did not come back within the grace` });
    }, this.graceMs);
    r.dropped.unref();
  }

  /**
   * The agent (re)connected here: the jobs it still runs are relayed from here, and their origins told so (the
   * agent may have been on another process meanwhile, even if this one never saw it leave); those it dropped
   * and no longer runs are lost.
   */
  hello(nodeId: string, still: ReadonlySet<string>, connection: number | null): void {
    for (const [jobId, r] of [...this.jobs]) {
      if (r.nodeId !== nodeId || older(r, connection)) continue; // heard after a later connection's: says nothing of it
      if (still.has(jobId)) this.claim(r.origin, jobId, nodeId, connection);
      // Dropped, or pushed to an earlier connection than this one, whose hello does not name it: the agent left that
      // connection without it.
      else if (r.dropped || later(r, connection)) {
        this.forget(jobId);
        this.tell(r.origin, { t: 'lost', job: jobId, why: `node ${nodeId} came back without the job` });
      }
    }
  }

  /** A channel of the node attached: jobs the agent reported on its connection (its hello came first) are held here again. */
  attached(nodeId: string, connection: number): void {
    for (const [jobId, r] of [...this.jobs]) {
      if (r.nodeId === nodeId && r.dropped && r.connection === connection) this.claim(r.origin, jobId, nodeId, connection);
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

  /** This process stops: its agents reconnect to another process, where their jobs go on; the origins wait the grace for that. */
  close(): void {
    for (const [jobId, r] of [...this.jobs]) {
      this.forget(jobId);
      if (!r.dropped) this.tell(r.origin, { t: 'dropped', job: jobId, why: 'the control-plane process holding the node channel is shutting down', counts: false });
    }
  }

  list(): Array<{ jobId: string; nodeId: string; origin: string }> {
    return [...this.jobs].map(([jobId, r]) => ({ jobId, nodeId: r.nodeId, origin: r.origin }));
  }

  /** The job relayed here for this node; one whose channel had dropped is held here again (its agent is back). */
  private back(nodeId: string, jobId: string, connection: number | null): Relayed | undefined {
    const r = this.jobs.get(jobId);
    if (!r || r.nodeId !== nodeId) return undefined;
    if (r.dropped && !older(r, connection)) this.claim(r.origin, jobId, nodeId, connection);
    return this.jobs.get(jobId);
  }

  private forget(jobId: string): void {
    const r = this.jobs.get(jobId);
    if (r?.dropped) clearTimeout(r.dropped);
    if (r) this.go(r); // nothing waits for a job no longer relayed here
    this.jobs.delete(jobId);
  }

  private go(r: Relayed): void {
    r.held?.go();
    r.held = undefined;
  }
}
