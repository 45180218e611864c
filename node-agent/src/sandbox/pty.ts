import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, type IPty } from 'node-pty';
import { WORKSPACE } from '@svc/shared';
import type { Box, SandboxDocker } from './docker.ts';
import type { ExecOptions, ExecOutcome } from './exec.ts';
import { SANDBOX_UID } from './limits.ts';
import { OutputSink } from './output.ts';

export const PTY_COLS = 120;
export const PTY_ROWS = 40;

/** A program under `docker exec -it` in a box, on a node-pty terminal. */
export interface DockerPty {
  term: IPty;
  /** The exec's id among the container's (found by the marker in its arguments), once it started. */
  findExec(): Promise<string | undefined>;
  /** The program's exit code as Docker recorded it, else the docker CLI's (`cliCode`). */
  exitCode(cliCode: number): Promise<number | null>;
  /** Removes the env file's directory (after the terminal exited). */
  dispose(): Promise<void>;
}

/**
 * Starts a program with a terminal: `docker exec -it` under node-pty. Environment values go through a 0600
 * `--env-file`, never argv. The program is wrapped as `sh -c 'exec "$@"' <marker> argv...` so its exec can be
 * found (and killed at the wall-clock limit, or on cancel) among the container's execs.
 */
export async function dockerPty(sd: SandboxDocker, box: Box, o: { argv: string[]; env: string[]; cols: number; rows: number }): Promise<DockerPty> {
  const marker = `svc-exec-${randomBytes(8).toString('hex')}`;
  for (const kv of o.env) if (kv.includes('\n')) throw new Error('invalid_request: a tty exec cannot take an environment value with a newline');
  const dir = await mkdtemp(join(tmpdir(), 'svc-pty-'));
  const envFile = join(dir, 'env');
  await writeFile(envFile, o.env.map((kv) => `${kv}\n`).join(''), { mode: 0o600 });
  await chmod(envFile, 0o600);
  const args = ['exec', '-it', '-u', SANDBOX_UID, '-w', WORKSPACE, '--env-file', envFile, box.id, 'sh', '-c', 'exec "$@"', marker, ...o.argv];
  let term: IPty;
  try {
    term = spawn('docker', args, {
      name: 'xterm-256color',
      cols: o.cols,
      rows: o.rows,
      cwd: dir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', DOCKER_HOST: `unix://${sd.socketPath}`, HOME: dir },
    });
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`a tty exec needs the docker CLI on this node: ${(e as Error).message}`);
  }
  let execId: string | undefined;
  const findExec = async (): Promise<string | undefined> => {
    if (execId) return execId;
    for (let i = 0; i < 50 && !execId; i++) {
      const ids = ((await box.container.inspect()) as { ExecIDs?: string[] | null }).ExecIDs ?? [];
      for (const id of ids) {
        const info = (await sd.docker.getExec(id).inspect().catch(() => null)) as { ProcessConfig?: { arguments?: string[] } } | null;
        if (info?.ProcessConfig?.arguments?.includes(marker)) execId = id;
      }
      if (!execId) await new Promise((r) => setTimeout(r, 20));
    }
    return execId;
  };
  return {
    term,
    findExec,
    async exitCode(cliCode) {
      const id = await findExec().catch(() => undefined);
      const info = id ? ((await sd.docker.getExec(id).inspect().catch(() => null)) as { Running: boolean; ExitCode: number | null } | null) : null;
      return info && !info.Running && info.ExitCode !== null ? info.ExitCode : cliCode;
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/**
 * Runs a program with a terminal (dockerPty), its screen output streamed as stdout (a terminal merges stderr
 * into it), the stdin text typed in and ended with ^D.
 */
export async function ptyExec(sd: SandboxDocker, box: Box, o: ExecOptions): Promise<ExecOutcome> {
  const pty = await dockerPty(sd, box, { argv: o.argv, env: o.env, cols: PTY_COLS, rows: PTY_ROWS });
  const { term } = pty;
  const started = performance.now();
  const out = new OutputSink('stdout', o.outputBytes, o.emit);
  let timedOut = false;
  let canceled: string | undefined;
  const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)));
  term.onData((d) => out.write(Buffer.from(d, 'utf8')));
  const kill = async () => {
    const id = await pty.findExec().catch(() => undefined);
    if (id) await o.kill(id).catch(() => undefined);
    setTimeout(() => term.kill('SIGKILL'), 2000).unref();
  };
  const timer = setTimeout(() => {
    timedOut = true;
    void kill();
  }, o.timeoutMs);
  const onAbort = () => {
    canceled = String(o.signal.reason ?? 'canceled');
    void kill();
  };
  if (o.signal.aborted) onAbort();
  else o.signal.addEventListener('abort', onAbort, { once: true });
  // Terminal input: the stdin text, then end-of-file (^D at the start of a line).
  if (o.stdin !== undefined) term.write(o.stdin.length > 0 && !o.stdin.endsWith('\n') ? `${o.stdin}\x04\x04` : `${o.stdin}\x04`);
  let cliCode: number;
  try {
    cliCode = await exited;
  } finally {
    clearTimeout(timer);
    o.signal.removeEventListener('abort', onAbort);
    await pty.dispose();
  }
  const duration = performance.now() - started;
  out.end();
  const exitCode = !timedOut && canceled === undefined ? await pty.exitCode(cliCode) : null;
  return {
    exit_code: exitCode,
    timed_out: timedOut,
    ...(canceled !== undefined ? { canceled } : {}),
    duration_ms: Math.round(duration * 1000) / 1000,
    stdout_bytes: out.bytes,
    stderr_bytes: 0,
    stdout_truncated: out.truncated,
    stderr_truncated: false,
  };
}
