import type { IPty } from 'node-pty';
import { TerminalInput, type TerminalJob, type TerminalResult, type TerminalSignal } from '@svc/shared';
import type { JobContext } from '../jobs/types.ts';
import type { Box, SandboxDocker } from './docker.ts';
import { killExec } from './exec.ts';
import { envList } from './program.ts';
import { dockerPty } from './pty.ts';

/** The terminal's program: bash where the image has it, else sh; interactive either way. */
const SHELL = ['sh', '-c', 'command -v bash >/dev/null 2>&1 && exec bash -i; exec sh -i'];
/** What the keyboard sends for the signals a terminal's line discipline makes of it. */
const CONTROL_CHARS: Partial<Record<TerminalSignal, string>> = { INT: '\x03', QUIT: '\x1c', TSTP: '\x1a' };
/** After its processes are killed, how long the docker CLI may take to exit before it is killed too. */
const CLI_GRACE_MS = 2000;
/** How often an acknowledgement waits for the terminal to take the input written to it. */
const ACK_POLL_MS = 10;

type Outcome = Omit<TerminalResult, 'oom_killed' | 'image_digest'>;

/** Bytes handed to node-pty that it has not written to the terminal yet (its write queue; 0 where it has none). */
function unwritten(term: IPty): number {
  const q = (term as unknown as { _writeStream?: { _writeQueue?: Array<{ buffer: Buffer; offset: number }> } })._writeStream?._writeQueue;
  return q ? q.reduce((n, t) => n + t.buffer.length - t.offset, 0) : 0;
}

/**
 * An interactive shell in a session's box under a terminal (`docker exec -it` on node-pty), for as long as its
 * caller keeps it: the screen streams as `stdout` outputs, held while the control plane cannot take more (the
 * pty is paused, so the program blocks on its terminal as it would on a slow one); `data` outputs say `ready`
 * once it runs, and acknowledge input by `seq` once node-pty wrote it to the terminal, which is what keeps the
 * control plane's window of input bounded here too. It ends when the shell exits, at `close` (the caller left or
 * was idle), at its wall-clock limit, or when the job is cancelled (then it throws, as a cancelled exec does).
 */
export async function runTerminal(sd: SandboxDocker, box: Box, job: TerminalJob, ctx: JobContext): Promise<Outcome> {
  const env = [...envList(job.env), ...(job.env.TERM === undefined ? ['TERM=xterm-256color'] : [])];
  const pty = await dockerPty(sd, box, { argv: SHELL, env, cols: job.cols, rows: job.rows });
  const { term } = pty;
  const started = performance.now();
  let bytes = 0;
  let ending: TerminalResult['reason'] | undefined;
  let canceled: string | undefined;
  let killing = false;

  const kill = (why: TerminalResult['reason']) => {
    ending ??= why;
    if (killing) return;
    killing = true;
    void (async () => {
      const id = await pty.findExec().catch(() => undefined);
      if (id) await killExec(sd, box, id).catch(() => undefined);
      setTimeout(() => term.kill('SIGKILL'), CLI_GRACE_MS).unref();
    })();
  };
  const signal = async (name: TerminalSignal) => {
    const ch = CONTROL_CHARS[name];
    if (ch) return term.write(ch);
    const id = await pty.findExec().catch(() => undefined);
    if (id) await killExec(sd, box, id, `SIG${name}` as 'SIGKILL' | 'SIGTERM' | 'SIGHUP').catch(() => undefined);
  };

  // Screen output; a promise from emit means the control plane holds the job back: the pty pauses until it lets go.
  let paused = 0;
  term.onData((d) => {
    bytes += Buffer.byteLength(d, 'utf8');
    const wait = ctx.emit('stdout', d);
    if (!(wait instanceof Promise)) return;
    if (paused++ === 0) term.pause();
    void wait.finally(() => {
      if (--paused === 0) term.resume();
    });
  });

  // Input in seq order; acknowledged up to the last one once node-pty wrote it all to the terminal.
  let consumed = -1;
  let acked = -1;
  let ackTimer: NodeJS.Timeout | undefined;
  const ack = () => {
    ackTimer = undefined;
    if (consumed === acked || ending) return;
    if (unwritten(term) > 0) {
      ackTimer = setTimeout(ack, ACK_POLL_MS);
      return;
    }
    acked = consumed;
    void ctx.emit('data', JSON.stringify({ type: 'ack', seq: acked }));
  };
  ctx.onInput?.((seq, raw) => {
    consumed = Math.max(consumed, seq);
    const input = TerminalInput.safeParse(raw);
    if (input.success && !ending) {
      const i = input.data;
      if (i.type === 'data') term.write(Buffer.from(i.data_b64, 'base64'));
      else if (i.type === 'resize') term.resize(i.cols, i.rows);
      else if (i.type === 'signal') void signal(i.name);
      else kill(i.reason);
    }
    ackTimer ??= setTimeout(ack, 0);
  });

  const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
  const timer = setTimeout(() => kill('timed_out'), job.max_ms);
  const onAbort = () => {
    canceled = String(ctx.signal.reason ?? 'canceled');
    kill('closed');
  };
  if (ctx.signal.aborted) onAbort();
  else ctx.signal.addEventListener('abort', onAbort, { once: true });
  void ctx.emit('data', JSON.stringify({ type: 'ready' }));

  let cliCode: number;
  try {
    cliCode = await exited;
  } finally {
    clearTimeout(timer);
    clearTimeout(ackTimer);
    ctx.signal.removeEventListener('abort', onAbort);
    await pty.dispose();
  }
  if (canceled !== undefined) throw new Error(`canceled: ${canceled}`);
  const duration = performance.now() - started;
  const reason = ending ?? 'exited';
  return {
    exit_code: reason === 'exited' ? await pty.exitCode(cliCode) : null,
    timed_out: reason === 'timed_out',
    reason,
    duration_ms: Math.round(duration * 1000) / 1000,
    stdout_bytes: bytes,
    stderr_bytes: 0,
    stdout_truncated: false,
    stderr_truncated: false,
  };
}
