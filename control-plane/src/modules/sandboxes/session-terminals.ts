import type { FastifyBaseLogger } from 'fastify';
import { SANDBOX_JOBS, ServiceError, TerminalResult, type Clock, type SignedReceipt } from '@svc/shared';
import type { SandboxConfig } from '../../config.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { SandboxExecutor } from './executor.ts';
import type { RunResult } from './schemas.ts';
import type { SandboxSessions } from './sessions.ts';
import { TerminalLink } from './terminal-link.ts';

export const TERMINAL_ROUTE = 'GET /v1/sandboxes/sessions/:id/terminal';
/** How often open terminals are checked for idleness (and their sessions kept active). */
const SWEEP_MS = 5000;
/** A session with an open terminal is marked active at least this often (its idle timeout does not run meanwhile). */
const TOUCH_MS = 30_000;

export interface SessionTerminalsDeps {
  clock: Clock;
  config: SandboxConfig;
  executor: SandboxExecutor;
  sessions: SandboxSessions;
  publicUrl: URL;
}

interface Open {
  link: TerminalLink;
  sessionId: string;
  /** When the session was last marked active for it (clock ms), and how often it must be. */
  touched: number;
  touchEveryMs: number;
}

/**
 * Interactive terminals into sandbox sessions, on this process: each is one `sandbox.session.terminal` job on the
 * session's node, metered as an exec is (held for its wall-clock limit, settled on the seconds it was open, with a
 * receipt and a run record labelled `terminal`), bridged to its caller's WebSocket by a TerminalLink. Idleness is
 * judged on the injected clock: `sweep` (every 5 s, and callable) closes a terminal whose caller neither typed nor
 * got output for the idle limit, and keeps the sessions of open terminals active.
 */
export class SessionTerminals {
  private readonly open = new Set<Open>();
  private readonly timer: NodeJS.Timeout;
  log: Pick<FastifyBaseLogger, 'error'> = { error: () => undefined };

  constructor(private readonly d: SessionTerminalsDeps) {
    this.timer = setInterval(() => void this.sweep().catch((e: unknown) => this.log.error({ err: e }, 'terminal sweep failed')), SWEEP_MS);
    this.timer.unref();
  }

  /** Terminals open on this process (for status and tests). */
  get size(): number {
    return this.open.size;
  }

  /**
   * Opens a terminal in the session: resolves once its shell runs on the node (the caller's connection is then
   * attached to the link); rejects, before any WebSocket is up, with what an HTTP answer says (a missing or
   * stopped session, no credit, the session's limit of terminals).
   */
  async start(p: KeyPrincipal, sessionId: string, size: { cols: number; rows: number }, req: { requestId: string; runId: string | null }): Promise<TerminalLink> {
    const session = await this.d.sessions.live(p.accountId, sessionId);
    const cfg = this.d.config.sessionTerminals;
    const now = () => this.d.clock.now().getTime();
    const link = new TerminalLink((jobId, seq, input) => this.d.executor.input(jobId, seq, input), now);
    const entry: Open = { link, sessionId: session.id, touched: now(), touchEveryMs: Math.min(TOUCH_MS, (session.idle_timeout_seconds * 1000) / 3) };
    this.open.add(entry);
    const run = this.d.executor
      .execute(
        p,
        { language: 'sh' },
        {
          kind: 'terminal',
          jobKind: SANDBOX_JOBS.sessionTerminal,
          payload: { session_id: session.id, cols: size.cols, rows: size.rows, max_ms: cfg.maxSeconds * 1000, max_terminals: cfg.perSession, env: {} },
          nodeId: session.node_id!,
          sessionId: session.id,
          network: session.network,
          timeoutSeconds: cfg.maxSeconds,
          label: 'terminal',
          detail: (r) => ({ reason: TerminalResult.safeParse(r).data?.reason ?? null }),
        },
        {
          requestId: req.requestId,
          runId: req.runId,
          resource: new URL(`/v1/sandboxes/sessions/${session.id}/terminal`, this.d.publicUrl).toString(),
          route: TERMINAL_ROUTE,
          onOutput: (o) => link.fromNode(o),
          onSent: (jobId) => link.sent(jobId),
          signal: link.abort.signal,
        },
      )
      .then(
        async (out): Promise<{ result: RunResult; receipt: SignedReceipt }> => {
          await this.d.sessions.recordExec(session.id, out.result.cost_micro_usd);
          return out;
        },
        (e: unknown) => this.d.sessions.execFailed(session.id, e),
      )
      .finally(() => this.open.delete(entry));
    run.then(
      (out) => link.exited(out),
      (e: unknown) => link.failed(e),
    );
    const early = run.then(() => {
      throw new ServiceError('upstream_error', 'The terminal ended before its shell ran');
    });
    early.catch(() => undefined); // once the shell runs, how the terminal ends goes to the link
    await Promise.race([link.ready, early]);
    return link;
  }

  /** Closes terminals idle past the limit (by the clock) and marks the sessions of the others active when due. */
  async sweep(): Promise<void> {
    const now = this.d.clock.now().getTime();
    const idleMs = this.d.config.sessionTerminals.idleSeconds * 1000;
    const touch = new Set<string>();
    for (const o of this.open) {
      if (now - o.link.lastActivity > idleMs) o.link.close('idle');
      else if (now - o.touched >= o.touchEveryMs) {
        o.touched = now;
        touch.add(o.sessionId);
      }
    }
    await this.d.sessions.touch([...touch]);
  }

  /** Stops the sweep (the process is stopping; its terminals end with their jobs). */
  stop(): void {
    clearInterval(this.timer);
  }
}
