import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { Capabilities, JobFinish, JobMessage, JobOutput, ServerMessage } from '@svc/shared';
import { dockerReachable, readCapabilities } from './capabilities.ts';
import { Channel } from './channel.ts';
import type { AgentConfig } from './config.ts';
import { HEARTBEAT_MS, postHeartbeat, type HeartbeatAnswer } from './heartbeat.ts';
import { echo, wait } from './jobs/diag.ts';
import type { JobHandler } from './jobs/types.ts';
import { inferenceHandlers, inferenceOptionsFromEnv } from './inference/index.ts';
import { sandboxOptionsFromEnv, startSandbox, type Sandbox, type SandboxOptions } from './sandbox/index.ts';
import { ConnectionNumbers } from './connection-numbers.ts';
import { JobOutputs } from './job-outputs.ts';
import { JobInput } from './job-input.ts';

export const AGENT_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** The timer functions the heartbeat schedule uses; tests inject a fake clock. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}
/** A job's finish that could not be delivered (the connection dropped) is tried again this often, this many times. */
const FINISH_ATTEMPTS = 5;
const FINISH_RETRY_MS = 2000;
/** An output the connection dropped under is sent again this many times in all. */
const OUTPUT_ATTEMPTS = 3;
/** The abort reason of a job that went too long without output. */
const IDLE = 'no output';
/** The job was stopped by the agent's own limits (its time limit, or too long without output), not cancelled. */
const ownLimit = (signal: AbortSignal): boolean => signal.aborted && (signal.reason === 'timed out' || signal.reason === IDLE);
/** How long a stop waits for cancelled jobs to end before removing their sandboxes itself. */
const STOP_JOBS_MS = 10_000;

const realTimers: Timers = { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout) };

export interface AgentOptions {
  /** Heartbeat interval; default HEARTBEAT_SECONDS (60 s), the spec's cadence. */
  heartbeatMs?: number;
  timers?: Timers;
  /** Seams for unit tests: how a heartbeat is posted and the capability snapshot read. */
  postHeartbeat?: typeof postHeartbeat;
  readCapabilities?: () => Promise<Capabilities>;
  /** The protocol version claimed on connect (default PROTOCOL_VERSION); only to exercise the refusal. */
  protocolVersion?: number;
  /** Called once the control plane names this node (a config enrolled with --key has no id yet). */
  onNodeId?: (nodeId: string) => void;
  log?: (msg: string) => void;
  handlers?: Record<string, JobHandler>;
  /** Sandbox jobs (Docker): options, or false for none. Default: from SVC_SANDBOX_IMAGE / SVC_SANDBOX_POOL. */
  sandbox?: SandboxOptions | false;
}

/** One node agent: heartbeats, the channel, and the jobs it runs. */
export class Agent {
  private readonly running = new Map<string, AbortController>();
  /** The input of the running jobs (InputMessage), kept until each job's handler takes it. */
  private readonly inputs = new Map<string, JobInput>();
  /** The job handlers still running (a stop waits for them to end). */
  private readonly handling = new Set<Promise<unknown>>();
  private readonly handlers: Record<string, JobHandler>;
  private channel: Channel | undefined;
  private timer: unknown;
  private fatal: ((message: string) => void) | undefined;
  private sandbox: Sandbox | undefined;
  private stopped = false;
  /** Numbers its connections in order, across restarts on this data dir (`<data dir>/connection-number`). */
  private readonly connections: ConnectionNumbers;
  readonly log: (msg: string) => void;
  last: HeartbeatAnswer | undefined;

  constructor(
    private readonly cfg: AgentConfig,
    private readonly opts: AgentOptions = {},
  ) {
    this.log = opts.log ?? ((m) => console.log(`[svc-node] ${new Date().toISOString()} ${m}`));
    this.connections = new ConnectionNumbers(join(cfg.data_dir, 'connection-number'));
    // Inference jobs where SVC_INFERENCE_URL names a local OpenAI-compatible server.
    const inference = inferenceOptionsFromEnv(process.env);
    this.handlers = { 'diag.echo': echo, 'diag.wait': wait, ...inferenceHandlers(inference && { ...inference, nodeId: () => this.last?.node_id ?? this.cfg.node_id }), ...opts.handlers };
  }

  /** Runs until stopped; resolves with a fatal refusal message if the control plane refuses this agent. */
  run(): Promise<string> {
    return new Promise<string>((resolve) => {
      this.fatal = (message) => {
        void this.stop();
        resolve(message);
      };
      // Sandbox handlers are registered (or not, if Docker is unreachable) before any job can arrive.
      void this.startSandbox().then(() => {
        if (!this.stopped) this.connect();
      });
    });
  }

  private async startSandbox(): Promise<void> {
    if (this.opts.sandbox === false) return;
    const s = await startSandbox({ ...sandboxOptionsFromEnv(process.env), ...this.opts.sandbox, dataDir: this.cfg.data_dir, log: this.log }).catch(
      (e: unknown) => ({ unavailable: (e as Error).message }),
    );
    if ('unavailable' in s) {
      this.log(`sandbox jobs disabled: ${s.unavailable}`);
      return;
    }
    if (this.stopped) {
      await s.stop();
      return;
    }
    this.sandbox = s;
    for (const [kind, h] of Object.entries(s.handlers)) this.handlers[kind] ??= h;
  }

  private connect(): void {
    this.channel = new Channel(this.cfg.url, this.cfg.node_key, AGENT_VERSION, {
      onMessage: (m) => this.onMessage(m),
      runningJobs: () => [...this.running.keys()],
      // Sandboxes start before the channel: an agent without them (no Docker) holds no session.
      heldSessions: () => this.sandbox?.sessions.held() ?? [],
      connection: () => this.connections.next(),
      onFatal: (m) => this.fatal?.(m),
      log: this.log,
    }, this.opts.protocolVersion);
    this.channel.start();
    this.startHeartbeats();
  }

  /** Posts a heartbeat now, then one every heartbeatMs (60 s) until stop(); a slow post never delays the next. */
  startHeartbeats(): void {
    const timers = this.opts.timers ?? realTimers;
    const every = this.opts.heartbeatMs ?? HEARTBEAT_MS;
    const beat = () => {
      if (this.stopped) return;
      void this.heartbeat();
      this.timer = timers.setTimeout(beat, every);
    };
    beat();
  }

  async heartbeat(): Promise<void> {
    try {
      const post = this.opts.postHeartbeat ?? postHeartbeat;
      this.last = await post(this.cfg.url, this.cfg.node_key, {
        capabilities: await (this.opts.readCapabilities ?? (() => readCapabilities(() => dockerReachable())))(),
        endpoint: this.cfg.endpoint,
        load: { running_jobs: this.running.size },
        agent_version: AGENT_VERSION,
      });
      if (!this.cfg.node_id && this.last.node_id) {
        this.cfg.node_id = this.last.node_id;
        this.opts.onNodeId?.(this.last.node_id);
      }
    } catch (e) {
      const status = (e as { status?: number }).status;
      if (status === 401) this.fatal?.(`the control plane refused the node key: ${(e as Error).message}`);
      else this.log(`heartbeat failed: ${(e as Error).message}`);
    }
  }

  private onMessage(m: ServerMessage): void {
    if (m.type === 'cancel') {
      this.running.get(m.job_id)?.abort(m.reason);
      return;
    }
    if (m.type === 'input') {
      this.inputs.get(m.job_id)?.push(m.seq, m.input);
      return;
    }
    this.runJob(m).catch((e: unknown) => this.log(`job ${m.job_id} ended in error: ${e instanceof Error ? e.message : String(e)}`));
  }

  private async runJob(m: JobMessage): Promise<void> {
    const ch = this.channel!;
    const ac = new AbortController();
    this.running.set(m.job_id, ac);
    const input = new JobInput();
    this.inputs.set(m.job_id, input);
    const timeout = setTimeout(() => ac.abort('timed out'), m.timeout_ms);
    // A stream's limit between two outputs (and until the first): restarted by each output. Time spent waiting
    // for the control plane to take outputs (a slow caller) is not the job's: held, the limit starts over.
    const idleMs = m.idle_timeout_ms;
    let idle: NodeJS.Timeout | undefined;
    const outputs = new JobOutputs(m.job_id, (batch) => this.deliverOutputs(ch, batch), () => idle?.refresh());
    idle = idleMs ? setTimeout(() => (outputs.held ? idle?.refresh() : ac.abort(IDLE)), idleMs) : undefined;
    ac.signal.addEventListener('abort', () => outputs.release()); // a cancelled job's handler stops waiting and sees the abort
    const started = performance.now();
    let finish: JobFinish;
    try {
      const handler = this.handlers[m.kind];
      if (!handler) throw new Error(`this agent does not run jobs of kind ${m.kind}`);
      const call = handler(m.payload, {
        jobId: m.job_id,
        signal: ac.signal,
        emit: (stream, data) => {
          idle?.refresh();
          const wait = outputs.emit(stream, data);
          if (wait && ac.signal.aborted) outputs.release(); // an aborted job never waits
          return wait;
        },
        onInput: (listener) => input.listen(listener),
      });
      this.handling.add(call);
      const out = await call.finally(() => this.handling.delete(call));
      // Stopped at the agent's own limit: a timeout, even where the handler reports what ran (a cancelled run does).
      if (ownLimit(ac.signal)) throw new Error(String(ac.signal.reason));
      finish = { job_id: m.job_id, ok: true, result: out.result, duration_ms: performance.now() - started, ...(out.workUnits !== undefined ? { work_units: out.workUnits } : {}) };
    } catch (e) {
      const timedOut = ownLimit(ac.signal);
      // An aborted fetch rejects with the abort's reason, which is a string here: not every failure is an Error.
      const message = timedOut ? (ac.signal.reason === IDLE ? `no output for ${idleMs} ms` : 'timed out') : e instanceof Error ? e.message : String(e);
      finish = { job_id: m.job_id, ok: false, error: message.slice(0, 2000), duration_ms: performance.now() - started, ...(timedOut ? { timed_out: true } : {}) };
    } finally {
      this.inputs.delete(m.job_id);
      clearTimeout(timeout);
      clearTimeout(idle);
      idle = undefined;
      outputs.release(); // nobody waits on a job that ended
    }
    try {
      await outputs.sent();
      // Output the control plane never got leaves a hole in what the job produced: it did not succeed.
      if (outputs.undelivered && finish.ok) finish = { job_id: m.job_id, ok: false, error: 'some of its output could not be delivered to the control plane', duration_ms: finish.duration_ms };
      await this.deliverFinish(ch, finish);
    } finally {
      this.running.delete(m.job_id);
    }
  }

  /**
   * Outputs, delivered in order: a message the connection dropped under is sent again (the client holds it
   * until it reconnects; the control plane takes each seq once). Another failure loses these outputs only.
   */
  private deliverOutputs(ch: Channel, batch: JobOutput[]): Promise<boolean> {
    return this.deliver(`output of ${batch[0]!.job_id}`, () => ch.outputs(batch), OUTPUT_ATTEMPTS, 0);
  }

  /**
   * The job's outcome, delivered: a failure to deliver it (the connection dropped before the answer, or the
   * control plane could not take it yet) is tried again, never reported as the job failing. The job counts as
   * running (reported in hello) until then. A finish sent while disconnected waits in the client's queue.
   */
  private async deliverFinish(ch: Channel, f: JobFinish): Promise<void> {
    await this.deliver(`finish of ${f.job_id}`, () => ch.finish(f), FINISH_ATTEMPTS, FINISH_RETRY_MS);
  }

  /** Sends until answered, `attempts` times at most with `pauseMs` between; false (logged) when it never was. */
  private async deliver(what: string, send: () => Promise<unknown>, attempts: number, pauseMs: number): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        await send();
        return true;
      } catch (e) {
        if (attempt >= attempts || this.stopped) return (this.log(`${what} not delivered: ${String(e)}`), false);
        if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs).unref()); // a pause before asking again, not a schedule
        if (this.stopped) return (this.log(`${what} not delivered: the agent stopped`), false);
      }
    }
  }

  /**
   * Stops taking work; resolves when sandbox containers and volumes are removed (callers may ignore it): the
   * running jobs are cancelled and given STOP_JOBS_MS to end (a run removes its own container), sessions and
   * the warm pool are removed, then whatever this agent process labelled and is still there.
   */
  stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) (this.opts.timers ?? realTimers).clearTimeout(this.timer);
    this.timer = undefined;
    for (const ac of this.running.values()) ac.abort('agent stopping');
    this.channel?.close();
    const s = this.sandbox;
    this.sandbox = undefined;
    if (!s) return Promise.resolve();
    const handlers = Promise.allSettled([...this.handling]);
    let wait: NodeJS.Timeout | undefined;
    const bounded = Promise.race([handlers, new Promise((r) => (wait = setTimeout(r, STOP_JOBS_MS)))]).finally(() => clearTimeout(wait));
    return bounded
      .then(() => s.stop())
      .then(() => s.docker.removeAll())
      .then((left) => {
        if (left > 0) this.log(`removed ${left} leftover sandbox containers and volumes`);
      })
      .catch((e: unknown) => this.log(`sandbox stop: ${(e as Error).message}`));
  }
}
