import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as ptySpawn } from 'node-pty';
import { expect } from 'vitest';
import { ManualClock } from '@svc/shared';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The installed `svc` launcher (package.json "bin"), which runs the built CLI (cli/dist), not the TypeScript entry point. */
export const BIN = join(ROOT, 'cli', 'bin', 'svc.js');
// The build the launcher runs, brought up to date with the sources first (nothing to do when it is).
execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs'), '--if-stale', 'cli'], { cwd: ROOT, stdio: 'pipe' });

/**
 * The gateway's clock for tests that drive the CLI: the CLI is another process, and stamps its SIWE messages
 * with the real time, which the gateway checks against its own clock (60 s of skew allowed). So this clock
 * runs with the real time, plus whatever the test advanced it by; a ManualClock frozen at the gateway's start
 * would refuse a sign-in made more than a minute later as "Issued At is in the future".
 */
export class WallClock extends ManualClock {
  private offset = 0;
  override now(): Date {
    return new Date(Date.now() + this.offset);
  }
  override advance(ms: number): void {
    this.offset += ms;
  }
  override set(at: Date | number): void {
    this.offset = (typeof at === 'number' ? at : at.getTime()) - Date.now();
  }
}

/** Variables the CLI reads; a test sets the ones it means, never inherits them. */
const CLI_ENV = ['SVC_URL', 'SVC_KEY', 'SVC_MODEL', 'SVC_WALLET_KEY', 'SVC_ADMIN_TOKEN', 'SVC_CONFIG_DIR', 'XDG_CONFIG_HOME'];

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout as it arrived: one entry per read. */
  chunks: Array<{ text: string }>;
}

export interface CliOptions {
  /** SVC_CONFIG_DIR. */
  dir: string;
  /** The gateway (--url); omitted: none is passed. */
  url?: string;
  env?: Record<string, string>;
  /** Written to the CLI's stdin, which is then closed. */
  input?: string;
  timeoutMs?: number;
  /** Called with all of stdout so far each time more arrives. */
  onStdout?: (sofar: string) => void;
}

/** The real `svc` running in a child process (stdin, stdout and stderr are pipes, so never a terminal). */
export interface CliProcess {
  /** Sends the CLI a signal (SIGINT: a Ctrl-C on its terminal). */
  kill(signal: NodeJS.Signals): void;
  /** stdout so far. */
  stdout(): string;
  /** Resolves once it exited. */
  done: Promise<CliRun>;
}

/** Starts the real `svc`; `done` resolves when it exits. */
export function startSvc(args: readonly string[], opts: CliOptions): CliProcess {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of CLI_ENV) delete env[k];
  Object.assign(env, { SVC_CONFIG_DIR: opts.dir }, opts.env);
  const argv = [BIN, ...(opts.url ? ['--url', opts.url] : []), ...args];
  const p = spawn(process.execPath, argv, { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const chunks: CliRun['chunks'] = [];
  let stderr = '';
  let sofar = '';
  p.stdout.setEncoding('utf8').on('data', (d: string) => {
    chunks.push({ text: d });
    sofar += d;
    opts.onStdout?.(sofar);
  });
  p.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const done = new Promise<CliRun>((resolve, reject) => {
    const timer = setTimeout(() => p.kill('SIGKILL'), opts.timeoutMs ?? 40_000);
    p.on('error', reject);
    p.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? -1 : 0), stdout: chunks.map((c) => c.text).join(''), stderr, chunks });
    });
  });
  p.stdin.on('error', () => undefined); // a CLI that exits before reading its stdin
  p.stdin.end(opts.input ?? '');
  return { kill: (signal) => p.kill(signal), stdout: () => chunks.map((c) => c.text).join(''), done };
}

/** Runs the real `svc` in a child process (stdin, stdout and stderr are pipes, so never a terminal). */
export function svc(args: readonly string[], opts: CliOptions): Promise<CliRun> {
  return startSvc(args, opts).done;
}

/** A failure as the CLI must report it: exactly one `error:` line on stderr, no stack trace, nothing on stdout. */
export function expectOneLineError(r: CliRun, code: number, pattern: RegExp): string {
  expect({ code: r.code, stdout: r.stdout }, r.stderr).toEqual({ code, stdout: '' });
  const errors = r.stderr.split('\n').filter((l) => l.startsWith('error: '));
  expect(errors, r.stderr).toHaveLength(1);
  expect(errors[0]).toMatch(pattern);
  expect(r.stderr).not.toMatch(/^\s+at /m);
  return errors[0]!;
}

/** Writes a 0600 file under `dir`; returns its path. */
export function secretFile(dir: string, name: string, content: string): string {
  const p = join(dir, name);
  writeFileSync(p, content, { mode: 0o600 });
  return p;
}

/** A session `svc login` saved in config directory `dir`: the one for `url`, else the default gateway's. */
export function savedSession(dir: string, url?: string): { url: string; token: string; account_id: string; wallet_address: string; expires_at: string } {
  const store = JSON.parse(readFileSync(join(dir, 'sessions.json'), 'utf8')) as { default: string; sessions: Record<string, ReturnType<typeof savedSession>> };
  const s = store.sessions[url ?? store.default];
  if (!s) throw new Error(`no session for ${url ?? store.default} in ${dir}`);
  return s;
}

/** Runs the real `svc` under a terminal (a pty of `cols` columns): stdout and stderr arrive together, as a person sees them. */
export function svcTty(args: readonly string[], opts: CliOptions & { cols?: number }): Promise<{ code: number; screen: string }> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !CLI_ENV.includes(k) && k !== 'NO_COLOR') env[k] = v;
  Object.assign(env, { SVC_CONFIG_DIR: opts.dir, TERM: 'xterm-256color' }, opts.env);
  const term = ptySpawn(process.execPath, [BIN, ...(opts.url ? ['--url', opts.url] : []), ...args], { name: 'xterm-256color', cols: opts.cols ?? 80, rows: 40, cwd: ROOT, env });
  let screen = '';
  term.onData((d) => (screen += d));
  return new Promise((resolve) => {
    const timer = setTimeout(() => term.kill('SIGKILL'), opts.timeoutMs ?? 40_000);
    term.onExit((e) => {
      clearTimeout(timer);
      resolve({ code: e.exitCode, screen });
    });
  });
}
