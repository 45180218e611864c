import { readFile } from 'node:fs/promises';
import type { Duplex } from 'node:stream';
import { WORKSPACE } from '@svc/shared';
import type { Box, SandboxDocker } from './docker.ts';
import { ignoreGone } from './errors.ts';
import { SANDBOX_UID } from './limits.ts';
import { Demuxer, ExitMarker, OutputSink, type Emit } from './output.ts';

export interface ExecOptions {
  argv: string[];
  env: string[];
  stdin?: string | undefined;
  timeoutMs: number;
  /** Per stream. */
  outputBytes: number;
  emit: Emit;
  signal: AbortSignal;
  /** Ends the program on timeout or cancel: the whole box for a run, the exec's processes in a session. */
  kill: (execId: string) => Promise<void>;
}

export interface ExecOutcome {
  exit_code: number | null;
  timed_out: boolean;
  /** Set when the job was cancelled (or hit the agent's own limit) while the program ran. */
  canceled?: string;
  duration_ms: number;
  stdout_bytes: number;
  stderr_bytes: number;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
}

/** After a kill, how long the attach stream may take to end before it is cut. */
const DRAIN_AFTER_KILL_MS = 3000;

export type Pumped = Omit<ExecOutcome, 'exit_code'> & { killed: boolean; /** From the runner's marker line. */ exitCode?: number };

/**
 * Moves one program's attach stream (Docker's multiplexed stdout/stderr, our stdin): writes `stdin` (after
 * `preamble`, if any) and ends it, streams output up to the cap, kills the program via `kill` at the
 * wall-clock limit or on cancel, and resolves when the stream ends (or, for a runner, when its exit marker
 * has come on both streams).
 */
export async function pump(
  stream: Duplex,
  o: Omit<ExecOptions, 'argv' | 'env' | 'kill'>,
  kill: () => Promise<void>,
  input?: { preamble?: string; end: boolean; exitMarker?: string },
): Promise<Pumped> {
  const started = performance.now();
  const out = new OutputSink('stdout', o.outputBytes, o.emit);
  const err = new OutputSink('stderr', o.outputBytes, o.emit);
  let done: () => void = () => undefined;
  // Docker copies stdout and stderr independently: the runner marks the end of both.
  const marks = input?.exitMarker ? { stdout: new ExitMarker(input.exitMarker, (d) => out.write(d)), stderr: new ExitMarker(input.exitMarker, (d) => err.write(d)) } : undefined;
  const demux = new Demuxer((s, d) => {
    if (!marks) (s === 'stderr' ? err : out).write(d);
    else if (marks[s].push(d) && marks.stdout.exitCode !== undefined && marks.stderr.exitCode !== undefined) done();
  });
  let timedOut = false;
  let canceled: string | undefined;
  let killing: Promise<void> | undefined;
  let cut: NodeJS.Timeout | undefined;
  const ended = new Promise<void>((resolve) => {
    done = resolve;
    stream.on('data', (d: Buffer) => demux.push(d));
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', () => resolve());
  });
  const stop = () => {
    killing ??= kill().catch(() => undefined);
    cut ??= setTimeout(() => stream.destroy(), DRAIN_AFTER_KILL_MS);
  };
  const timer = setTimeout(() => {
    timedOut = true;
    stop();
  }, o.timeoutMs);
  const onAbort = () => {
    canceled = String(o.signal.reason ?? 'canceled');
    stop();
  };
  if (o.signal.aborted) onAbort();
  else o.signal.addEventListener('abort', onAbort, { once: true });
  if (input) {
    if (input.preamble !== undefined) stream.write(input.preamble);
    if (input.end) stream.end(o.stdin ?? '');
  }
  try {
    await ended;
  } finally {
    clearTimeout(timer);
    o.signal.removeEventListener('abort', onAbort);
  }
  const duration = performance.now() - started;
  await killing;
  clearTimeout(cut);
  stream.destroy();
  marks?.stdout.flush();
  marks?.stderr.flush();
  out.end();
  err.end();
  return {
    ...(marks?.stderr.exitCode !== undefined ? { exitCode: marks.stderr.exitCode } : {}),
    timed_out: timedOut,
    ...(canceled !== undefined ? { canceled } : {}),
    killed: timedOut || canceled !== undefined,
    duration_ms: Math.round(duration * 1000) / 1000,
    stdout_bytes: out.bytes,
    stderr_bytes: err.bytes,
    stdout_truncated: out.truncated,
    stderr_truncated: err.truncated,
  };
}

/**
 * Runs a program in a started box with `docker exec` (no tty), pipes stdin, streams stdout and stderr up to
 * the cap, and kills it at the wall-clock limit or on cancel. The exit code is null when it was killed.
 */
export async function execProgram(box: Box, o: ExecOptions): Promise<ExecOutcome> {
  const withStdin = o.stdin !== undefined;
  const exec = await box.container.exec({
    Cmd: o.argv,
    Env: o.env,
    User: SANDBOX_UID,
    WorkingDir: WORKSPACE,
    AttachStdin: withStdin,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
  });
  const stream = (await exec.start({ hijack: true, stdin: withStdin })) as Duplex;
  const { killed, ...p } = await pump(stream, o, () => o.kill(exec.id), withStdin ? { end: true } : undefined);
  return { ...p, exit_code: killed ? null : await exitCodeOf(exec) };
}

/** The exec's exit code; its stream may end a moment before Docker records the exit. */
async function exitCodeOf(exec: { inspect(): Promise<{ Running: boolean; ExitCode: number | null }> }): Promise<number | null> {
  for (let i = 0; i < 100; i++) {
    const info = await exec.inspect();
    if (!info.Running) return info.ExitCode;
    await new Promise((r) => setTimeout(r, 10));
  }
  return null;
}

/**
 * Kills one exec's processes in a box that lives on (a session). Docker has no API for it. runc makes each
 * exec'd process a session and process-group leader, so on the Docker host the group is killed by the
 * exec's host PID; where that PID is not ours to signal, `kill` runs inside the container against the
 * group's PID there (or, failing that, every process of the sandbox user but init: for SIGKILL only).
 * `signal` sends another signal the same way (a terminal's HUP or TERM).
 */
export async function killExec(sd: SandboxDocker, box: Box, execId: string, signal: 'SIGKILL' | 'SIGTERM' | 'SIGHUP' = 'SIGKILL'): Promise<void> {
  const info = (await sd.docker.getExec(execId).inspect()) as { Pid?: number; Running: boolean };
  const pid = info.Pid ?? 0;
  if (!info.Running || pid <= 0) return;
  const cgroup = await readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '');
  if (cgroup.includes(box.id)) {
    try {
      process.kill(-pid, signal);
      return;
    } catch {
      /* not permitted: kill from inside */
    }
  }
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const nspid = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/).pop();
  const name = signal.slice(3);
  if (!(nspid && cgroup.includes(box.id)) && signal !== 'SIGKILL') return;
  const cmd = nspid && cgroup.includes(box.id) ? ['kill', `-${name}`, '--', `-${nspid}`] : ['kill', '-KILL', '-1'];
  const k = await box.container.exec({ Cmd: cmd, User: SANDBOX_UID, AttachStdout: false, AttachStderr: false });
  await ignoreGone(k.start({ Detach: true }));
}
