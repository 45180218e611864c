import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { ServiceError, newId, type Clock, type JobFinish, type JobOutput, type ServerMessage } from '@svc/shared';
import type { DB } from '../db/schema.ts';
import { AsyncQueue } from './queue.ts';
import type { FleetRelay, RelayMessage } from './relay.ts';
import { RelayedJobs } from './relayed-jobs.ts';
import { RemoteJobs, moveTo } from './remote-jobs.ts';
import { ChannelRecord } from './channel-record.ts';
import { JobClaims } from './claims.ts';
import { AgentReports } from './agent-reports.ts';
import type { NodeRegistry } from './registry.ts';
import type { SchedulerNode } from './registry-view.ts';
import { NodeLost, PendingJobs, later, older, type Pending, type Stopwatch } from './pending-jobs.ts';
import { isEligible, pickNode, pickRanked, type JobNeed } from './scheduler.ts';
import { idleLimit, type JobResult, type JobSpec } from './job-spec.ts';

export type { JobResult, JobSpec } from './job-spec.ts';

interface Conn {
  nodeId: string;
  queue: AsyncQueue<ServerMessage>;
  /** The agent's number for the connection (ConnectionParams.connection), or null. */
  connection: number | null;
}

/** How many nodes a dispatch picks from the scheduler's view and checks against their rows before it reads the registry whole. */
const INDEX_TRIES = 3;

/** The items of `xs` that pass `keep`, lazily (the view is not copied per dispatch). */
function* filter<T>(xs: Iterable<T>, keep: (x: T) => boolean): IterableIterator<T> {
  for (const x of xs) if (keep(x)) yield x;
}

/** How often processes check the other end of their relayed jobs, and re-assert the channels they hold. */
const RELAY_WATCH_MS = 5000;

/**
 * The agent hub: live channels of the agents connected to this process, and the dispatch primitive.
 * dispatch() picks a node (scheduler), records the job, pushes it over the channel, streams output back
 * and resolves on finish; it cancels on timeout or when the caller aborts. What the agents report on the
 * channels (outputs, finishes) is routed to its job by AgentReports.
 *
 * Node-drop rule: if a node's channel drops, its jobs wait `reconnectGraceMs` (30 s) for the agent to come
 * back and report them in `hello(running_jobs)`; those carry on. A job not reported (or not back in time)
 * is lost: lost before any output, it is dispatched once more on another node (unless `retryable: false`,
 * pinned to a node, or already a retry); lost after output started, it is never re-run (the caller has
 * seen part of it) and fails 502 `upstream_error` with `reason: "node_lost"` and its `job_id`.
 *
 * Outcomes (registry.recordOutcome): a finish the agent reports counts succeeded or failed and gives a
 * latency sample; a lost job and a job the control plane times out count failed; a cancel by the caller
 * (spec.signal, waiting or not for the node to report the stopped job: spec.cancelGraceMs) counts neither way. Every attempt and its end is recorded in `jobs`, so nothing is lost silently.
 *
 * Several processes (with a relay): `nodes.channel_process` says which process holds each node's channel.
 * A node whose channel another process holds is dispatched to through that process (`FleetRelay`, the origin's
 * side in RemoteJobs, the holder's in RelayedJobs): this
 * process (the origin) keeps the job's record, timers, outcome and the node-drop rule; the holder passes the
 * job to the agent and relays its output and finish back, and says when its channel dropped. Wherever the
 * agent reconnects with the job (this process, the holder, or any other: `jobs.origin_process` tells that one
 * whose job it is), the job carries on from there. A holder that does not take the job within RELAY_ACK_MS
 * or refuses it (the agent moved) makes the job lost before output (dispatched once more elsewhere); a holder
 * that leaves the database starts the grace; neither counts against the node. A job whose origin left the
 * database is cancelled on its node.
 */
export class AgentHub {
  private readonly conns = new Map<string, Conn>();
  private readonly jobs: PendingJobs;
  /** Jobs of other processes relayed to agents on this process's channels (with a relay). */
  private readonly relayed: RelayedJobs | null;
  /** This process's jobs on channels other processes hold (with a relay). */
  private readonly remote: RemoteJobs | null;
  /** `nodes.channel_process` for the channels this process holds (with a relay). */
  private readonly channels: ChannelRecord | null;
  /** Jobs of other processes whose agent reconnected here mid-job (with a relay). */
  private readonly claims: JobClaims | null;
  /** Outputs and finishes from the agents on this process's channels. */
  private readonly reports: AgentReports;
  private watchTimer: NodeJS.Timeout | null = null;
  private watching: Promise<void> | null = null;
  /** Each node's latest numbered connection whose hello said which jobs the agent runs. */
  private readonly hellos = new Map<string, number>();

  /** Told which sandbox sessions an agent holds when its hello says (Hello.sessions); set by the gateway. */
  sessionsHeld: ((nodeId: string, sessions: string[]) => Promise<void>) | null = null;

  /** Times the round trip of each job this process dispatches (the nodes' latency samples). */
  readonly stopwatch: Stopwatch = { now: () => performance.now() };

  /** Set to the app's logger once it exists; silent until then. */
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'> = { info: () => undefined, warn: () => undefined, error: () => undefined };

  constructor(
    private readonly registry: NodeRegistry,
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly reconnectGraceMs = 30_000,
    /** Dispatch through other processes (Postgres); null: this process is the only one (embedded database). */
    private readonly relay: FleetRelay | null = null,
  ) {
    this.jobs = new PendingJobs({ db, clock, registry, log: () => this.log, reconnectGraceMs, stopwatch: this.stopwatch, cancel: (jobId, why) => this.cancel(jobId, why) });
    const push = (nodeId: string, m: ServerMessage) => {
      const conn = this.conns.get(nodeId);
      conn?.queue.push(m);
      return conn !== undefined;
    };
    this.remote = relay && new RemoteJobs(relay, this.jobs, () => this.log, (jobId, why) => this.cancel(jobId, why));
    this.relayed =
      relay &&
      new RelayedJobs(relay, push, () => this.log, reconnectGraceMs, (nodeId) => this.conns.get(nodeId)?.connection ?? null, (nodeId) => this.hellos.get(nodeId) ?? -1);
    this.channels = relay && new ChannelRecord(db, relay.self, () => this.log, relay.goneCheck(), (rows) => registry.view.written(rows));
    this.claims =
      relay &&
      new JobClaims(db, relay.self, this.relayed!, {
        attached: (nodeId) => this.conns.has(nodeId),
        connection: (nodeId) => this.conns.get(nodeId)?.connection,
        known: (jobId) => this.jobs.has(jobId) || this.relayed!.has(jobId),
        cancel: (nodeId, jobId) => this.cancelOrphan(nodeId, jobId),
      });
    this.reports = new AgentReports({ jobs: this.jobs, relayed: this.relayed, claims: this.claims, log: () => this.log, ownChannel: (p, c) => this.onOwnChannel(p, c) });
  }

  /** Starts taking relay messages from other processes. */
  async start(): Promise<void> {
    if (!this.relay) return;
    await this.relay.start((from, m) => this.onRelay(from, m));
    this.watchTimer = setInterval(() => void this.watch().catch((e: unknown) => this.log.error({ err: e }, 'relay watch failed')), RELAY_WATCH_MS);
    this.watchTimer.unref();
  }

  /** The node's channel is held by this process. */
  isConnected(nodeId: string): boolean {
    return this.conns.has(nodeId);
  }

  /** The node's channel is held by this process or by another one still connected to the database. */
  async reachable(nodeId: string): Promise<boolean> {
    if (!this.relay) return this.conns.has(nodeId);
    const record = await this.channels!.holder(nodeId);
    if (this.local({ id: nodeId, ...record })) return true;
    const holder = this.holderOf({ id: nodeId, ...record });
    return !!holder && (await this.relay.alive([holder])).has(holder);
  }

  /**
   * Jobs for the node go onto this process's own channel: it has one, and the record does not name another
   * process's later connection of the agent (this one was left without a close reaching it: nobody is on it).
   */
  private local(n: { id: string; channel: string | null; channelEpoch: number | null }): boolean {
    const conn = this.conns.get(n.id);
    if (!conn) return false;
    const later = !!this.relay && !!n.channel && n.channel !== this.relay.self && n.channelEpoch !== null && conn.connection !== null && n.channelEpoch > conn.connection;
    return !later;
  }

  attach(nodeId: string, connection: number | null = null): Conn {
    this.conns.get(nodeId)?.queue.close();
    const conn = { nodeId, queue: new AsyncQueue<ServerMessage>(), connection };
    this.conns.set(nodeId, conn);
    this.log.info({ node_id: nodeId }, 'agent channel attached');
    void this.channels?.held(nodeId, connection);
    // Jobs the agent reported on this connection (its hello came first) are on a channel again: out of the grace
    // an older channel's end put them in.
    if (connection !== null) {
      for (const p of this.jobs.all()) if (p.nodeId === nodeId && !p.holder && p.connection === connection) this.jobs.endGrace(p);
      this.relayed?.attached(nodeId, connection);
    }
    return conn;
  }

  detach(conn: Conn): void {
    if (this.conns.get(conn.nodeId) !== conn) return this.replaced(conn);
    this.conns.delete(conn.nodeId);
    this.claims?.detached(conn.nodeId, conn.connection);
    this.log.info({ node_id: conn.nodeId }, 'agent channel detached');
    void this.channels?.released(conn.nodeId);
    // Jobs the agent reported on a later connection (its hello came before that connection's channel) wait in the
    // grace too, which that channel's attach ends (or the agent's next hello naming them, if it never attaches).
    this.dropJobs(conn);
    this.relayed?.detached(conn.nodeId, conn.connection);
  }

  /**
   * A channel that a later one of the agent replaced before its close reached this process (the agent
   * reconnected first). Its jobs the agent reported on a later connection moved on with it; the others went
   * into a connection the agent had left (see dropJobs).
   */
  private replaced(conn: Conn): void {
    // Only when a later connection replaced it: an older one attaching late (its subscription slower than the
    // later one's) leaves the later one's jobs where they are (its agent subscribes on it again).
    const current = this.conns.get(conn.nodeId)?.connection ?? null;
    if (conn.connection === null || current === null || current <= conn.connection) return;
    this.dropJobs(conn, (p) => p.connection === conn.connection);
    this.relayed?.detached(conn.nodeId, conn.connection, true);
  }

  /**
   * The jobs (`mine`; all of the node's own) of a channel that ended: those sent into it are lost at once when
   * the agent already said hello on a later connection (it had left this one: a job its hello did not name, or
   * one sent in after it, never reached it), else they wait in the grace for a hello naming them (or, for a job
   * a hello named already, for its connection's channel to attach).
   */
  private dropJobs(conn: Conn, mine: (p: Pending) => boolean = () => true): void {
    const left = conn.connection !== null && (this.hellos.get(conn.nodeId) ?? -1) > conn.connection;
    for (const p of this.jobs.all()) {
      if (p.nodeId !== conn.nodeId || p.holder || !mine(p)) continue;
      if (left && p.connection === conn.connection) this.jobs.lose(p, `node ${p.nodeId} reconnected without the job`);
      else this.jobs.grace(p, `node ${p.nodeId} dropped`, true);
    }
  }

  /**
   * On (re)connect the agent says what it still runs: those jobs carry on, the rest of ours are lost. A job of
   * another process (the agent was on a third process before) is relayed from here to its origin; the jobs
   * nobody owns any more are cancelled.
   */
  async hello(nodeId: string, running: string[], connection: number | null = null): Promise<{ cancelled: string[] }> {
    const still = new Set(running);
    for (const p of this.jobs.all()) {
      if (p.nodeId !== nodeId || older(p, connection)) continue;
      if (still.has(p.jobId)) {
        this.onOwnChannel(p, connection);
        this.jobs.endGrace(p);
      } else if (p.lostTimer) {
        this.jobs.endGrace(p);
        this.jobs.lose(p);
      } else if (!p.holder && later(p, connection)) {
        this.jobs.lose(p, `node ${nodeId} reconnected without the job`); // sent into a connection the agent had left
      }
    }
    if (connection !== null && connection > (this.hellos.get(nodeId) ?? -1)) this.hellos.set(nodeId, connection);
    this.relayed?.hello(nodeId, still, connection);
    const unknown = running.filter((id) => !this.jobs.has(id) && !this.relayed?.has(id));
    const orphans = this.claims ? await this.claims.running(nodeId, unknown, connection) : unknown;
    for (const id of orphans) this.cancelOrphan(nodeId, id);
    return { cancelled: orphans };
  }

  private cancelOrphan(nodeId: string, jobId: string): void {
    this.conns.get(nodeId)?.queue.push({ type: 'cancel', job_id: jobId, reason: 'the control plane no longer tracks this job' });
  }

  /** The process to relay through for this node: its channel's holder, when that is another process. */
  private holderOf(n: { id: string; channel: string | null; channelEpoch: number | null }): string | undefined {
    if (this.local(n) || !this.relay || !n.channel || n.channel === this.relay.self) return undefined;
    return n.channel;
  }

  async dispatch(spec: JobSpec, exclude: string[] = []): Promise<JobResult> {
    const now = this.clock.now();
    const need: JobNeed = { kind: spec.nodeKind, model: spec.model, exclude, allowDraining: spec.nodeId !== undefined };
    let node = await this.fromIndex(spec, need, now);
    const holder = node ? this.holderOf(node) : undefined;
    if (node && holder && !(await this.relay!.alive([holder])).has(holder)) node = null;
    node ??= await this.fromRegistry(spec, need, now);
    if (!node) {
      throw new ServiceError('no_capacity', `No eligible ${spec.nodeKind ?? ''} node is available for ${spec.kind}${spec.model ? ` for model ${spec.model}` : ''}; retry shortly`, { retryable: true, retry_after: 5 });
    }
    const jobId = newId('job_', 20);
    await this.db
      .insertInto('jobs')
      .values({ id: jobId, node_id: node.id, account_id: spec.accountId ?? null, kind: spec.kind, status: 'dispatched', attempts: exclude.length + 1, error: null, created_at: now, dispatched_at: now, ended_at: null, origin_process: this.relay?.self ?? null })
      .execute();
    try {
      const payload = typeof spec.payload === 'function' ? (spec.payload as (nodeId: string) => unknown)(node.id) : spec.payload;
      return await this.run(jobId, node.id, { ...spec, payload }, this.holderOf(node));
    } catch (e) {
      // A job whose caller left is never run again elsewhere.
      if (e instanceof NodeLost && spec.retryable !== false && exclude.length === 0 && !spec.nodeId && !spec.signal?.aborted) {
        this.log.warn({ job_id: jobId, node_id: node.id }, 'node lost before output; dispatching once more elsewhere');
        return this.dispatch(spec, [node.id]);
      }
      if (e instanceof NodeLost) throw new ServiceError('upstream_error', `The node running this job went away (${e.message})`, { job_id: jobId, reason: 'node_lost' });
      throw e;
    } finally {
      if (spec.unrecorded) await this.db.deleteFrom('jobs').where('id', '=', jobId).execute().catch((e: unknown) => this.log.error({ err: e, job_id: jobId }, 'could not delete an unrecorded job'));
    }
  }

  /** The node reaches this process: its channel is here, or another process holds it (and the job is not pinned elsewhere). */
  private reaches(n: SchedulerNode, spec: JobSpec): boolean {
    return (this.local(n) || this.holderOf(n) !== undefined) && (!spec.nodeId || n.id === spec.nodeId);
  }

  /**
   * The best node in the scheduler's view (registry.view.ranked, no read of the registry), taken only once its row
   * as it is now says it still is eligible and reachable (a gate, an un-approval, a suspension or a silence
   * committed by any process keeps the job off it); a pinned job reads only its node's row. Null: none passed the
   * check within INDEX_TRIES picks (the caller reads the registry whole).
   */
  private async fromIndex(spec: JobSpec, need: JobNeed, now: Date): Promise<SchedulerNode | null> {
    if (spec.nodeId) {
      const n = await this.registry.view.fresh(spec.nodeId);
      return n && this.reaches(n, spec) && isEligible(n, need, now) ? n : null;
    }
    const tried: string[] = [];
    for (let i = 0; i < INDEX_TRIES; i++) {
      const view = await this.registry.view.ranked();
      const picked = pickRanked(filter(view, (n) => this.reaches(n, spec)), { ...need, exclude: [...(need.exclude ?? []), ...tried] }, now);
      if (!picked) return null;
      const n = await this.registry.view.fresh(picked.id);
      if (n && this.reaches(n, spec) && isEligible(n, need, now)) return n;
      tried.push(picked.id);
    }
    return null;
  }

  /** The best node read from the whole registry (as every dispatch did before the index), relaying through no process that is gone. */
  private async fromRegistry(spec: JobSpec, need: JobNeed, now: Date): Promise<SchedulerNode | null> {
    let nodes = (await this.registry.view.snapshots()).filter((n) => this.reaches(n, spec));
    let node = pickNode(nodes, need, now);
    const holder = node ? this.holderOf(node) : undefined;
    if (node && holder && !(await this.relay!.alive([holder])).has(holder)) {
      // Its holder left without clearing the record (killed): relay through no process that is gone.
      const alive = await this.relay!.alive([...new Set(nodes.map((n) => this.holderOf(n)).filter((h) => h !== undefined))]);
      nodes = nodes.filter((n) => this.local(n) || alive.has(this.holderOf(n)!));
      node = pickNode(nodes, need, now);
    }
    return node;
  }

  private run(jobId: string, nodeId: string, spec: JobSpec, holder: string | undefined): Promise<JobResult> {
    if (!holder && !this.conns.has(nodeId)) {
      // The channel detached after the node was picked: the job never reached it (not held against the node;
      // dispatched once more elsewhere when it may be).
      return this.jobs.end(jobId, 'failed', 'node lost').then(() => Promise.reject(new NodeLost(`node ${nodeId} dropped before the job was sent`)));
    }
    let onAbort: (() => void) | undefined;
    let grace: NodeJS.Timeout | undefined;
    const done = new Promise<JobResult>((resolve, reject) => {
      // The agent enforces timeout_ms itself and reports timed_out; this is the backstop for an agent that never answers.
      const timer = setTimeout(() => {
        if (!this.jobs.has(jobId)) return;
        this.cancel(jobId, 'timed out');
        this.jobs.fail(p, 'timed_out', 'timed out', { outcome: 'failed', durationMs: spec.timeoutMs }, new ServiceError('upstream_timeout', `Job timed out after ${spec.timeoutMs} ms`, { job_id: jobId }));
      }, spec.timeoutMs + 5_000);
      timer.unref();
      const conn = holder ? undefined : this.conns.get(nodeId)!;
      const p: Pending = { jobId, nodeId, spec, sentAt: this.stopwatch.now(), gotOutput: false, lastSeq: -1, timer, resolve, reject, holder, connection: conn?.connection ?? null };
      this.jobs.add(p);
      if (!holder) conn!.queue.push({ type: 'job', job_id: jobId, kind: spec.kind, payload: spec.payload, timeout_ms: spec.timeoutMs, ...idleLimit(spec) });
      else this.remote!.send(p);
      spec.onSent?.(jobId, nodeId);
      const giveUp = () => {
        if (this.jobs.get(jobId) !== p) return;
        this.jobs.fail(p, 'canceled', 'caller went away', { outcome: 'canceled', durationMs: this.stopwatch.now() - p.sentAt }, new ServiceError('conflict', 'Job canceled'));
      };
      onAbort = () => {
        if (!this.jobs.has(jobId) || p.canceled) return;
        this.cancel(jobId, 'caller went away');
        if (!spec.cancelGraceMs) return giveUp();
        // Followed on: the node's finish says what ran until it stopped (or the grace runs out).
        p.canceled = true;
        grace = setTimeout(giveUp, spec.cancelGraceMs);
        grace.unref();
      };
      if (spec.signal?.aborted) onAbort();
      else spec.signal?.addEventListener('abort', onAbort, { once: true });
    });
    // A caller's signal that outlives its jobs (a batch's) keeps no listener of each.
    return done.finally(() => {
      clearTimeout(grace);
      spec.signal?.removeEventListener('abort', onAbort!);
    });
  }

  /**
   * Input for one of this process's open jobs that takes it (a terminal), in `seq` order: onto the node's channel
   * here, or through the process holding it. False when the job is not open here. Input is not kept for a channel
   * that is down (the agent tells by `seq`); what bounds it on the way is the caller's window (RelayMessage).
   */
  input(jobId: string, seq: number, input: unknown): boolean {
    const p = this.jobs.get(jobId);
    if (!p) return false;
    if (!p.holder) this.conns.get(p.nodeId)?.queue.push({ type: 'input', job_id: jobId, seq, input });
    else this.remote!.sendInput(p, seq, input);
    return true;
  }

  cancel(jobId: string, reason: string): void {
    const p = this.jobs.get(jobId);
    if (!p) return;
    if (!p.holder) this.conns.get(p.nodeId)?.queue.push({ type: 'cancel', job_id: jobId, reason });
    else this.remote!.sendCancel(p.holder, jobId, reason);
  }

  /** The agent reported the job on this process's own channel, on `connection` (not older than the job's). */
  private onOwnChannel(p: Pending, connection: number | null): void {
    if (p.holder) moveTo(p, undefined, connection);
    else p.connection = connection ?? p.connection;
  }

  /** Messages of output agents sent on this process's channels (one carries one output or several, in order). */
  get outputMessages(): number {
    return this.reports.outputMessages;
  }

  /** Writes this process made to the relay (one carries one message or several about a job). */
  get relayWrites(): number {
    return this.relay?.writes ?? 0;
  }

  /** One message of outputs from an agent on this process's channel (see AgentReports.outputs). */
  onOutputs(nodeId: string, outputs: JobOutput[], connection: number | null = null): Promise<void> {
    return this.reports.outputs(nodeId, outputs, connection);
  }

  /** A finish from an agent on this process's channel (see AgentReports.finish). */
  onFinish(nodeId: string, f: JobFinish, connection: number | null = null): Promise<void> {
    return this.reports.finish(nodeId, f, connection);
  }

  /** A message from another process (see FleetRelay): a job for this process's agents, or about one of its own. */
  private onRelay(from: string, m: RelayMessage): void {
    if (m.t === 'job') return this.relayed!.take(from, m, this.jobs.has(m.job));
    if (m.t === 'cancel') return this.relayed!.cancel(from, m.job, m.reason);
    if (m.t === 'hold' || m.t === 'go') return this.relayed!.flow(from, m.job, m.t === 'hold');
    if (m.t === 'input') return this.relayed!.input(from, m);
    this.remote!.onMessage(from, m);
  }

  /**
   * What the watch timer does: the other ends of relayed jobs, the channels this process holds, unread messages.
   * One at a time (a slow database must not make two rounds count one absence twice).
   */
  watch(): Promise<void> {
    this.watching ??= this.watchOnce().finally(() => (this.watching = null));
    return this.watching;
  }

  private async watchOnce(): Promise<void> {
    if (!this.relay) return;
    await this.watchRelayed();
    await this.channels!.reassert([...this.conns.values()]);
    await this.relay.sweep();
  }

  /**
   * Jobs whose other end left the database (FleetRelay.gone): a job relayed
   * through a holder that is gone is lost (before output: dispatched once more elsewhere; a cancel is sent in
   * case the holder was only away); a job relayed for an origin that is gone is cancelled on its node.
   */
  async watchRelayed(): Promise<void> {
    if (!this.relay) return;
    const gone = await this.relay.gone([...new Set([...this.remote!.holders(), ...this.relayed!.origins()])]);
    this.remote!.holdersGone(gone);
    this.relayed!.originsGone(gone);
  }

  /** Jobs of other processes this process relays to its agents (for status and tests). */
  relayedJobs(): Array<{ jobId: string; nodeId: string; origin: string }> {
    return this.relayed?.list() ?? [];
  }

  /** Jobs still open in this process (for status and tests). */
  openJobs(): Array<{ jobId: string; nodeId: string; kind: string }> {
    return this.jobs.list();
  }

  async close(): Promise<void> {
    if (this.watchTimer) clearInterval(this.watchTimer);
    for (const c of this.conns.values()) c.queue.close();
    for (const nodeId of [...this.conns.keys()]) {
      this.conns.delete(nodeId);
      void this.channels?.released(nodeId);
    }
    this.relayed?.close();
    for (const p of this.jobs.all()) {
      await this.jobs.end(p.jobId, 'failed', 'control plane shutting down');
      p.reject(new ServiceError('unavailable', 'The control plane is shutting down'));
    }
    await this.channels?.idle();
    await this.relay?.close();
  }
}

