import { ExecResult, ServiceError, type Clock, type JobOutput, type Language, type SignedReceipt } from '@svc/shared';
import type { SandboxConfig } from '../../config.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { CallerSignal } from '../../http/caller-signal.ts';
import type { AgentHub } from '../../fleet/hub.ts';
import type { Metering, Usage } from '../money/metering.ts';
import { CallerLeaving, type Ran } from './caller-leaving.ts';
import type { RunRecords } from './records.ts';
import type { RunResult } from './schemas.ts';

export interface ProgramInput {
  language: Language;
  code?: string | undefined;
  command?: string[] | undefined;
  stdin?: string | undefined;
  env?: Record<string, string> | undefined;
  timeout_seconds?: number | undefined;
}

export interface ExecContext {
  requestId: string;
  runId: string | null;
  resource: string;
  route: string;
  /** Streamed output; when absent, output is collected into the result (never stored). */
  onOutput?: (o: JobOutput) => unknown;
  /**
   * The caller went away: a run or exec is stopped on its node and charged for the seconds it ran (a terminal's
   * job is canceled; its own close ends it, see TerminalLink). Without it the program runs to its end.
   */
  signal?: CallerSignal;
  /** The job went to its node (its id, for input: AgentHub.input). */
  onSent?: (jobId: string) => void;
}

export interface ExecTarget {
  kind: 'run' | 'exec' | 'terminal';
  jobKind: string;
  payload: Record<string, unknown>;
  nodeId?: string | undefined;
  sessionId: string | null;
  network: boolean;
  /** The time limit, when not the program's `timeout_seconds` (a terminal's). */
  timeoutSeconds?: number;
  /** What the run history and the receipt call the program, when not its language (`terminal`). */
  label?: string;
  /** More of the job's result for the receipt's detail (how a terminal ended). */
  detail?: (result: unknown) => Record<string, unknown>;
}

const DEFAULT_TIMEOUT_S = 30;
/** How long a run or exec whose caller left may take to be stopped on its node and report what ran. */
const STOP_GRACE_MS = 15_000;

/**
 * Runs one metered sandbox program: hold the cost of the whole time limit, dispatch to a sandbox node,
 * collect or stream its output, settle on the actual duration at the configured price, and record the
 * run's metadata. The receipt carries exit code, duration and image digest, never output.
 *
 * A run or exec whose caller goes away (`ctx.signal`) is stopped on its node and charged for the seconds it ran,
 * as the node reports them (status `canceled`, receipt `detail.outcome: "client_disconnected"`), whether or not
 * anyone is left to read the answer. A node that reports nothing within STOP_GRACE_MS (it went away, or an agent
 * from before it reported stopped programs) is charged the seconds the gateway saw, from the job's sending to the
 * caller's leaving (`detail.duration_source: "gateway"`). A caller that leaves before the job went out pays nothing.
 */
export class SandboxExecutor {
  constructor(
    private readonly hub: AgentHub,
    private readonly metering: Metering,
    private readonly records: RunRecords,
    private readonly clock: Clock,
    private readonly cfg: SandboxConfig,
  ) {}

  timeoutSeconds(p: ProgramInput): number {
    const t = p.timeout_seconds ?? DEFAULT_TIMEOUT_S;
    if (t > this.cfg.maxTimeoutSeconds) throw new ServiceError('invalid_request', `timeout_seconds: at most ${this.cfg.maxTimeoutSeconds} on this deployment`, { param: 'timeout_seconds' });
    return t;
  }

  /** Input for a job of this process that takes it (a terminal's keystrokes): AgentHub.input. */
  input(jobId: string, seq: number, input: unknown): boolean {
    return this.hub.input(jobId, seq, input);
  }

  costOf(durationMs: number): number {
    return Math.max(1, Math.ceil((durationMs * this.cfg.pricePerSecondMicroUsd) / 1000));
  }

  programPayload(p: ProgramInput, timeoutS: number) {
    return {
      language: p.language,
      ...(p.code !== undefined ? { code: p.code } : {}),
      ...(p.command ? { command: p.command } : {}),
      ...(p.stdin !== undefined ? { stdin: p.stdin } : {}),
      env: p.env ?? {},
      timeout_ms: timeoutS * 1000,
    };
  }

  /** The usage of a program's end: its seconds at the configured price, and the receipt's detail (never output). */
  private charge(r: Ran, nodeId: string, target: ExecTarget, label: string, jobResult: unknown) {
    const ms = Math.round(r.duration_ms);
    const usage: Usage = {
      costMicroUsd: this.costOf(ms),
      kind: 'sandbox',
      units: { duration_ms: ms },
      detail: {
        exit_code: r.exit_code,
        duration_ms: ms,
        image_digest: r.image_digest || null,
        timed_out: r.timed_out,
        oom_killed: r.oom_killed,
        language: label,
        network: target.network,
        session_id: target.sessionId,
        ...(r.canceled !== undefined ? { outcome: 'client_disconnected' } : {}),
        ...(r.measured ? { duration_source: 'gateway' } : {}),
        ...(jobResult !== null ? target.detail?.(jobResult) : {}),
      },
    };
    return { result: { r, nodeId }, usage };
  }

  async execute(principal: KeyPrincipal, program: ProgramInput, target: ExecTarget, ctx: ExecContext): Promise<{ result: RunResult; receipt: SignedReceipt }> {
    const timeoutS = target.timeoutSeconds ?? this.timeoutSeconds(program);
    const label = target.label ?? (program.command ? 'command' : program.language);
    const out = { stdout: '', stderr: '' };
    // A run or exec is stopped when its caller leaves, and charged for what ran; a terminal ends by its own close.
    const leaving = target.kind !== 'terminal' && ctx.signal ? new CallerLeaving(ctx.signal, this.clock) : null;
    const onOutput = (o: JobOutput) => {
      leaving?.relayed(o);
      if (ctx.onOutput) return ctx.onOutput(o);
      if (o.stream === 'stdout' || o.stream === 'stderr') out[o.stream] += o.data;
    };
    const settled = await this.metering.meter(
      // A terminal's hold lasts as long as the terminal: a row of its own, not a credit lease's.
      { principal, requestId: ctx.requestId, runId: ctx.runId, maxCostMicroUsd: this.costOf(timeoutS * 1000 + 5000), route: ctx.route, resource: ctx.resource, durable: target.kind === 'terminal' },
      async () => {
        try {
          if (leaving?.left) throw new ServiceError('conflict', 'The caller went away before the program started');
          const job = await this.hub.dispatch({
            kind: target.jobKind,
            nodeKind: 'sandbox',
            payload: target.payload,
            timeoutMs: timeoutS * 1000 + 10_000,
            accountId: principal.accountId,
            nodeId: target.nodeId,
            retryable: target.kind === 'run',
            onOutput,
            signal: ctx.signal,
            ...(leaving ? { cancelGraceMs: STOP_GRACE_MS } : {}),
            onSent: (jobId, nodeId) => {
              leaving?.sent(nodeId);
              ctx.onSent?.(jobId);
            },
          });
          const r: Ran = ExecResult.parse(job.result);
          // Stopped on its node for a reason of the node's own (its agent stopping): a failure, not a charge.
          if (r.canceled !== undefined && !leaving?.left) throw new ServiceError('upstream_error', `The node stopped the program before it ended (${r.canceled})`, { job_id: job.jobId });
          return this.charge(r, job.nodeId, target, label, job.result);
        } catch (e) {
          // The caller left after the job went out, and the node reported nothing of the stopped program.
          const seen = leaving?.seen(e);
          if (!seen) throw e;
          return this.charge(seen.r, seen.nodeId, target, label, null);
        } finally {
          leaving?.stop();
        }
      },
    );
    const { r, nodeId } = settled.result;
    const cost = settled.receipt.payload.cost_micro_usd;
    const status = r.canceled !== undefined ? 'canceled' : r.timed_out ? 'timed_out' : r.exit_code === 0 ? 'succeeded' : 'failed';
    await this.records.insert({
      id: ctx.requestId,
      account_id: principal.accountId,
      key_id: principal.keyId,
      session_id: target.sessionId,
      node_id: nodeId,
      language: label,
      network: target.network,
      status,
      exit_code: r.exit_code,
      timed_out: r.timed_out,
      oom_killed: r.oom_killed,
      duration_ms: Math.round(r.duration_ms),
      stdout_bytes: r.stdout_bytes,
      stderr_bytes: r.stderr_bytes,
      cost_micro_usd: cost,
      image_digest: r.image_digest || null,
      receipt_id: settled.receipt.payload.id,
      created_at: this.clock.now(),
    });
    const rc = settled.receipt;
    return {
      receipt: rc,
      result: {
        id: ctx.requestId,
        object: target.kind === 'run' ? 'sandbox.run' : 'sandbox.exec',
        status,
        exit_code: r.exit_code,
        stdout: out.stdout,
        stderr: out.stderr,
        stdout_truncated: r.stdout_truncated,
        stderr_truncated: r.stderr_truncated,
        timed_out: r.timed_out,
        oom_killed: r.oom_killed,
        duration_ms: Math.round(r.duration_ms),
        cost_micro_usd: cost,
        node_id: nodeId,
        session_id: target.sessionId,
        image_digest: r.image_digest,
        receipt: { id: rc.payload.id, hash: rc.hash, signature: rc.signature, signer: rc.payload.signer, payload: rc.payload },
      },
    };
  }
}

