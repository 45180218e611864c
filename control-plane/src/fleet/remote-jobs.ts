import type { FastifyBaseLogger } from 'fastify';
import type { FleetRelay, RelayMessage } from './relay.ts';
import { older, type Pending, type PendingJobs } from './pending-jobs.ts';
import { idleLimit } from './job-spec.ts';

/** How long the origin waits for the holder to take a job before it counts the node as lost for it. */
export const RELAY_ACK_MS = 5000;

/** The messages a holder (or a process the agent passed) sends back to a job's origin. */
type OriginMessage = Exclude<RelayMessage, { t: 'job' } | { t: 'cancel' } | { t: 'hold' } | { t: 'go' } | { t: 'input' }>;

/**
 * The origin's side of the relay: this process's jobs on nodes whose channel another process holds (the
 * holder's side is RelayedJobs). The job stays this process's (record, timers, outcome, the node-drop rule,
 * in PendingJobs); this sends it and its cancel to the holder and applies what comes back: the holder took it
 * (`accepted`) or could not (`refused`: the agent moved), the agent's output and finish, the holder's channel
 * dropped (`dropped`, the grace) or the agent reconnected without the job (`lost`), and the agent carrying the
 * job on at another process (`moved`). A holder that does not answer within RELAY_ACK_MS counts the node as
 * lost for the job, not against it.
 */
export class RemoteJobs {
  constructor(
    private readonly relay: FleetRelay,
    private readonly jobs: PendingJobs,
    private readonly log: () => Pick<FastifyBaseLogger, 'error'>,
    /** Cancels the job wherever it is (the hub's cancel). */
    private readonly cancel: (jobId: string, why: string) => void,
  ) {}

  /** Sends the job (added to `jobs` with `p.holder` set) to the process holding its node's channel. */
  send(p: Pending): void {
    const holder = p.holder!;
    const gone = (why: string) => {
      const full = `${why} (process ${holder}, which holds the channel of node ${p.nodeId})`;
      this.cancel(p.jobId, full); // in case the holder takes it after all: the job must not run unowned
      this.jobs.lose(p, full, false);
    };
    this.relay.send(holder, { t: 'job', job: p.jobId, node: p.nodeId, kind: p.spec.kind, payload: p.spec.payload, timeout_ms: p.spec.timeoutMs, ...idleLimit(p.spec) }).then(
      () => {
        if (this.jobs.get(p.jobId) !== p || p.holder !== holder || p.gotOutput) return; // answered already
        p.ackTimer = setTimeout(() => gone(`no answer within ${RELAY_ACK_MS} ms`), RELAY_ACK_MS);
        p.ackTimer.unref();
      },
      (e: unknown) => {
        this.log().error({ err: e, job_id: p.jobId }, 'could not relay a job');
        gone('the job could not be relayed');
      },
    );
  }

  /** Input of jobs gathered while an earlier write about the job is on its way: the next write carries it all. */
  private readonly inputs = new Map<string, { to: string; ms: RelayMessage[] }>();

  /** Sends input for the job to the process holding its node's channel, after what was sent about the job before. */
  sendInput(p: Pending, seq: number, input: unknown): void {
    const to = p.holder!;
    const m: RelayMessage = { t: 'input', job: p.jobId, seq, input };
    const waiting = this.inputs.get(p.jobId);
    if (waiting && waiting.to === to) {
      waiting.ms.push(m);
      return;
    }
    const batch = { to, ms: [m] };
    this.inputs.set(p.jobId, batch);
    const take = () => {
      if (this.inputs.get(p.jobId) === batch) this.inputs.delete(p.jobId);
      return batch.ms;
    };
    this.relay.sendGathered(to, p.jobId, take).catch((e: unknown) => this.log().error({ err: e, job_id: p.jobId }, 'could not relay input'));
  }

  /** Asks `holder` to cancel the job on its node (or tells a process that moved a job nobody owns). */
  sendCancel(holder: string, jobId: string, reason: string): void {
    this.relay.send(holder, { t: 'cancel', job: jobId, reason }).catch((e: unknown) => this.log().error({ err: e, job_id: jobId }, 'could not relay a cancel'));
  }

  /** A message about one of this process's jobs from another process. */
  onMessage(from: string, m: OriginMessage): void {
    const p = this.jobs.get(m.job);
    if (m.t === 'moved') {
      // The agent runs the job on `from`'s channel now (it reconnected there): that process relays it from here on.
      if (!p) return this.sendCancel(from, m.job, 'the job is no longer open at the process that dispatched it');
      // A `moved` from a connection older than one the job is known on took longer than the later one's: the
      // agent is not there any more (that process forgets the job once its channel drops).
      if (older(p, m.connection ?? null)) return;
      moveTo(p, from, m.connection);
      this.jobs.endGrace(p);
      // Its consumer still holds back: the process relaying it now is told, else the agent's outputs would pile
      // up here unchecked (the `go` goes to `heldAt`, now this one).
      if (p.held && p.heldAt !== from) this.hold(p, from);
      return;
    }
    if (!p) return;
    const fromHolder = p.holder === from;
    if (fromHolder) {
      clearTimeout(p.ackTimer);
      p.ackTimer = undefined;
    }
    if (m.t === 'output' || m.t === 'finish') {
      // The agent's reports, relayed by its holder, by a process it left (still in flight when it moved) or by
      // one it passed while that one looked the job up: the agent's all the same.
      if (fromHolder) this.jobs.endGrace(p); // the holder answers: it was not gone after all
      if (m.t === 'output') this.holdBack(p, from, this.jobs.output(p, m.o));
      else void this.jobs.finish(p, m.f).catch((e: unknown) => this.log().error({ err: e, job_id: p.jobId }, 'could not finish a relayed job'));
      return;
    }
    if (!fromHolder) return;
    if (m.t === 'refused') this.jobs.lose(p, m.why, false);
    else if (m.t === 'lost') this.jobs.lose(p, m.why);
    else if (m.t === 'dropped') this.jobs.grace(p, `${m.why} (process ${from})`, m.counts);
    else {
      // accepted
      if (m.connection != null && p.connection === null) p.connection = m.connection;
      this.jobs.endGrace(p);
    }
  }

  /**
   * An output's consumer asked to wait (a slow caller): the process relaying the job (`from`) is told to `hold`
   * the agent's next outputs until this says `go`, when no output of the job waits any more. The relay then
   * carries at most about one message of the agent's outputs beyond what the consumer keeps.
   */
  private holdBack(p: Pending, from: string, wait: void | Promise<void>): void {
    if (!(wait instanceof Promise)) return;
    // p.held counts the outputs that wait (PendingJobs.output): this one is counted, and by the time `wait`
    // settles, uncounted.
    if (p.held === 1) this.hold(p, from);
    void wait.finally(() => {
      if (p.held || !p.heldAt) return;
      this.relay.send(p.heldAt, { t: 'go', job: p.jobId }).catch((e: unknown) => this.log().error({ err: e, job_id: p.jobId }, 'could not relay a go'));
    });
  }

  /** Tells `at`, the process relaying the job, to hold the agent's outputs back until `go`. */
  private hold(p: Pending, at: string): void {
    p.heldAt = at;
    this.relay.send(at, { t: 'hold', job: p.jobId }).catch((e: unknown) => this.log().error({ err: e, job_id: p.jobId }, 'could not relay a hold'));
  }

  /** The holders this process's open jobs are relayed through. */
  holders(): string[] {
    return this.jobs.all().flatMap((p) => (p.holder ? [p.holder] : []));
  }

  /** Holders that left the database (FleetRelay.gone): their jobs wait in the grace, not counted against the node. */
  holdersGone(gone: Set<string>): void {
    for (const p of this.jobs.all()) {
      if (p.holder && gone.has(p.holder)) this.jobs.grace(p, `process ${p.holder}, which held the channel of node ${p.nodeId}, is gone`, false);
    }
  }
}

/**
 * The job's channel is held by `holder` now: another process (`moved`), or undefined when the agent moved to
 * this process's own channel (the old holder's late `lost`, `dropped` or `refused` no longer applies), on the
 * agent's connection numbered `connection`.
 */
export function moveTo(p: Pending, holder: string | undefined, connection: number | null | undefined): void {
  p.holder = holder;
  p.connection = connection ?? null;
  if (p.ackTimer) clearTimeout(p.ackTimer);
  p.ackTimer = undefined;
}
