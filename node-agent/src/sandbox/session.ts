import type { z } from 'zod';
import { SANDBOX_ERRORS, SessionCreateJob, SessionExecJob, SessionStopJob, TerminalJob, type ExecResult, type TerminalResult } from '@svc/shared';
import type { JobContext } from '../jobs/types.ts';
import type { Box, SandboxDocker } from './docker.ts';
import { notFound } from './errors.ts';
import { execProgram, killExec, type ExecOptions } from './exec.ts';
import { envList, programArgv } from './program.ts';
import { ptyExec } from './pty.ts';
import type { Snapshots } from './snapshots.ts';
import { runTerminal } from './terminal.ts';
import { writeTmp } from './tmp.ts';

interface Session {
  id: string;
  box: Box;
  outputBytes: number;
  idleMs: number;
  running: number;
  /** Terminals open (counted in `running` too). */
  terminals: number;
  idleTimer: NodeJS.Timeout | undefined;
  stopping: Promise<void> | undefined;
}

/**
 * Sandbox sessions: one container per session, alive between execs, its workspace kept until the session
 * stops (by `sandbox.session.stop`, or after `idle_timeout_ms` with no exec running or started).
 */
export class Sessions {
  private readonly sessions = new Map<string, Session>();
  private readonly creating = new Map<string, Promise<Session>>();

  constructor(
    private readonly sd: SandboxDocker,
    private readonly snapshots: Snapshots,
  ) {}

  get size(): number {
    return this.sessions.size;
  }

  /** The sessions this agent holds: live ones and those being created (reported to the control plane on connect). */
  held(): string[] {
    return [...new Set([...[...this.sessions.values()].filter((s) => !s.stopping).map((s) => s.id), ...this.creating.keys()])];
  }

  /** The session's box, or `sandbox_not_found`. */
  box(id: string): Box {
    const s = this.sessions.get(id);
    if (!s || s.stopping) throw notFound(`no session ${id} on this node`);
    return s.box;
  }

  async create(payload: unknown): Promise<{ container_id: string; image_digest: string }> {
    const job = SessionCreateJob.parse(payload);
    const existing = this.sessions.get(job.session_id) ?? (await this.creating.get(job.session_id));
    if (existing && !existing.stopping) return { container_id: existing.box.id, image_digest: existing.box.imageId };
    const p = this.start(job);
    this.creating.set(job.session_id, p);
    try {
      const s = await p;
      return { container_id: s.box.id, image_digest: s.box.imageId };
    } finally {
      this.creating.delete(job.session_id);
    }
  }

  private async start(job: z.infer<typeof SessionCreateJob>): Promise<Session> {
    if (job.snapshot_id !== undefined) await this.snapshots.check(job.snapshot_id);
    const box = await this.sd.createBox({ kind: 'session', mode: 'idle', owner: job.session_id, network: job.network, limits: job.limits, env: envList(job.env) });
    try {
      if (job.snapshot_id !== undefined) await this.snapshots.restore(box, job.snapshot_id);
    } catch (e) {
      await this.sd.destroyBox(box).catch(() => undefined);
      throw e;
    }
    const s: Session = { id: job.session_id, box, outputBytes: job.limits.output_bytes, idleMs: job.idle_timeout_ms, running: 0, terminals: 0, idleTimer: undefined, stopping: undefined };
    this.sessions.set(s.id, s);
    this.arm(s);
    return s;
  }

  async exec(payload: unknown, ctx: JobContext): Promise<ExecResult> {
    const job = SessionExecJob.parse(payload);
    const s = this.sessions.get(job.session_id);
    if (!s || s.stopping) throw notFound(`no session ${job.session_id} on this node`);
    s.running++;
    clearTimeout(s.idleTimer);
    try {
      const before = await this.sd.oom.count(s.box);
      const argv = await programArgv(job, (path, content) => writeTmp(s.box, path, content));
      const opts: ExecOptions = {
        argv,
        env: envList(job.env),
        stdin: job.stdin,
        timeoutMs: job.timeout_ms,
        outputBytes: s.outputBytes,
        emit: ctx.emit,
        signal: ctx.signal,
        kill: (execId) => killExec(this.sd, s.box, execId),
      };
      const outcome = job.tty ? await ptyExec(this.sd, s.box, opts) : await execProgram(s.box, opts);
      const oomKilled = await this.sd.oom.killedSince(s.box, before, outcome.exit_code);
      // A cancelled exec (its processes killed; the session lives on) reports what ran, `canceled` set.
      return { ...outcome, oom_killed: oomKilled, image_digest: s.box.imageId };
    } finally {
      s.running--;
      this.arm(s);
    }
  }

  /**
   * An interactive terminal in the session (runTerminal), at most `max_terminals` of them open at once (above:
   * `sandbox_busy`). The session does not idle out while one is open.
   */
  async terminal(payload: unknown, ctx: JobContext): Promise<TerminalResult> {
    const job = TerminalJob.parse(payload);
    const s = this.sessions.get(job.session_id);
    if (!s || s.stopping) throw notFound(`no session ${job.session_id} on this node`);
    if (s.terminals >= job.max_terminals) throw new Error(`${SANDBOX_ERRORS.busy}: session ${s.id} has ${s.terminals} terminals open, the most it may have at once; close one first`);
    s.terminals++;
    s.running++;
    clearTimeout(s.idleTimer);
    try {
      const before = await this.sd.oom.count(s.box);
      const out = await runTerminal(this.sd, s.box, job, ctx);
      return { ...out, oom_killed: await this.sd.oom.killedSince(s.box, before, out.exit_code), image_digest: s.box.imageId };
    } finally {
      s.terminals--;
      s.running--;
      this.arm(s);
    }
  }

  /** Stops a session and removes its container and workspace; stopping an unknown session is fine. */
  async stop(payload: unknown): Promise<{ stopped: boolean }> {
    const { session_id } = SessionStopJob.parse(payload);
    await this.creating.get(session_id)?.catch(() => undefined);
    const s = this.sessions.get(session_id);
    if (!s) return { stopped: false };
    await this.end(s);
    return { stopped: true };
  }

  private end(s: Session): Promise<void> {
    clearTimeout(s.idleTimer);
    s.stopping ??= this.sd.destroyBox(s.box).finally(() => this.sessions.delete(s.id));
    return s.stopping;
  }

  private arm(s: Session): void {
    clearTimeout(s.idleTimer);
    if (s.running > 0 || s.stopping) return;
    s.idleTimer = setTimeout(() => void this.end(s).catch(() => undefined), s.idleMs);
    s.idleTimer.unref();
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => this.end(s).catch(() => undefined)));
  }
}
