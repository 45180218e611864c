import { createWriteStream, readFileSync, statSync } from 'node:fs';
import { basename } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { Option, type Command } from 'commander';
import { RECEIPT_HEADERS } from '@svc/shared';
import { ApiError, sseFrames, type SvcClient } from '@svc/shared/client';
import { context, keyClient } from '../context.ts';
import { CliError, EXIT_FAILURE, fileProblem, setExitCode, streamedError, usageError } from '../errors.ts';
import { collectEnv, readStdin, wholeSeconds } from '../input.ts';
import { fields, table, usd } from '../output.ts';
import { leaveOnInterrupt } from '../interrupt.ts';
import { onSession, sessionError } from '../sandbox-errors.ts';
import { registerShell } from './sandbox-shell.ts';
import { exitCodeOf } from './run.ts';

/** A session as the gateway shows it (GET /v1/sandboxes/sessions/{id}). */
export interface SessionView {
  id: string;
  status: string;
  node_id: string | null;
  network: boolean;
  alive_seconds: number;
  exec_count: number;
  cost_micro_usd: number;
  idle_timeout_seconds: number;
  snapshot_id: string | null;
  created_at: string;
}
interface Listing {
  path: string;
  entries: Array<{ name: string; type: string; size: number; mtime: string }>;
}
interface ExecMeta {
  exit_code: number | null;
  timed_out: boolean;
  oom_killed: boolean;
  duration_ms: number;
  cost_micro_usd: number;
  receipt: { id: string };
}

const LANGUAGES = ['sh', 'python', 'node'] as const;
/** What one workspace file may hold (PUT .../files/*). */
const MAX_FILE_BYTES = 8 * 1024 * 1024;
const seconds = wholeSeconds(86400);

/** A workspace path as the URL carries it: each segment encoded, the slashes kept. */
const filePath = (p: string) =>
  p
    .replace(/^\/workspace\/?/, '')
    .split('/')
    .filter((s) => s !== '')
    .map(encodeURIComponent)
    .join('/');

function sessionText(s: SessionView): string {
  return fields([
    ['id', s.id],
    ['status', s.status],
    ['node', s.node_id ?? '-'],
    ['network', s.network ? 'yes' : 'no'],
    ['idle timeout', `${s.idle_timeout_seconds} s`],
    ['execs', String(s.exec_count)],
    ['cost', usd(s.cost_micro_usd)],
    ['created', s.created_at],
  ]);
}

/**
 * An exec: answered at its end (stdout and stderr apart), or streamed as it comes (`stream`: the gateway runs a
 * streamed exec under a terminal, so stderr arrives merged into stdout, with CRLF line ends).
 */
async function runExec(client: SvcClient, id: string, body: Record<string, unknown>, json: boolean, stream: boolean): Promise<{ meta: ExecMeta; stdout: string; stderr: string }> {
  if (!stream) {
    const r = await onSession(id, () => client.request<ExecMeta & { stdout: string; stderr: string }>('POST', `/v1/sandboxes/sessions/${encodeURIComponent(id)}/exec`, { body: { ...body, stream: false } }));
    const { stdout, stderr, ...meta } = r;
    if (!json) {
      process.stdout.write(stdout);
      process.stderr.write(stderr);
    }
    return { meta, stdout, stderr };
  }
  const res = await client.raw('POST', `/v1/sandboxes/sessions/${encodeURIComponent(id)}/exec`, { body: { ...body, stream: true } });
  if (!res.ok) throw sessionError(id, new ApiError(res.status, await res.json().catch(() => undefined), res.headers));
  let meta: ExecMeta | undefined;
  const out = { stdout: '', stderr: '' };
  const stay = leaveOnInterrupt('exec', res.headers.get(RECEIPT_HEADERS.id));
  try {
    for await (const f of sseFrames(res)) {
      if (f.event === 'stdout' || f.event === 'stderr') {
        const data = (JSON.parse(f.data) as { data: string }).data;
        if (json) out[f.event] += data;
        else (f.event === 'stdout' ? process.stdout : process.stderr).write(data);
      } else if (f.event === 'result') meta = JSON.parse(f.data) as ExecMeta;
      else if (f.event === 'error') {
        const e = (JSON.parse(f.data) as { error?: { type?: string; message?: string } }).error;
        const err = streamedError({ type: 'internal_error', message: 'the exec failed', ...e }, 'check the session with `svc sandbox status`, then retry', 'the exec did not finish');
        throw e?.type === 'conflict' ? sessionError(id, new ApiError(409, { error: e }, new Headers())) : err;
      }
    }
  } finally {
    stay();
  }
  if (!meta) throw new CliError('the exec ended without a result (the connection closed)', EXIT_FAILURE, 'check the session with `svc sandbox list`, then retry');
  return { meta, ...out };
}

export function registerSandbox(program: Command): void {
  const sandbox = program
    .command('sandbox')
    .description('Sandbox sessions: one container with a workspace that lives between commands (needs an API key with the sandboxes scope: SVC_KEY or --api-key-file)');

  sandbox
    .command('open')
    .description('Open a session; prints its id')
    .option('--network', 'give the container network access (where the deployment allows it)')
    .option('--idle-timeout <seconds>', 'stop the session after this long without use (default: the gateway\'s, 600)', seconds)
    .option('-e, --env <NAME=value>', 'an environment variable of the container (repeatable)', collectEnv)
    .option('--snapshot <id>', 'start from a snapshot of another session (snap_...)')
    .action(async (opts: { network?: boolean; idleTimeout?: number; env?: Record<string, string>; snapshot?: string }, cmd: Command) => {
      const ctx = context(cmd);
      const client = keyClient(ctx);
      const body: Record<string, unknown> = {};
      if (opts.network) body.network = true;
      if (opts.idleTimeout !== undefined) body.idle_timeout_seconds = opts.idleTimeout;
      if (opts.env) body.env = opts.env;
      if (opts.snapshot) body.snapshot_id = opts.snapshot;
      const s = await client.request<SessionView>('POST', '/v1/sandboxes/sessions', { body });
      ctx.out.result(s, () => s.id);
      if (!ctx.out.json) ctx.out.note(`session ${s.id} ${s.status} on node ${s.node_id ?? '-'}; \`svc sandbox shell ${s.id}\` for a terminal, \`svc sandbox rm ${s.id}\` to stop it`);
    });

  sandbox
    .command('list')
    .description('Your sessions, newest first (the 100 latest)')
    .action(async (_opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const list = await keyClient(ctx).request<SessionView[]>('GET', '/v1/sandboxes/sessions');
      ctx.out.result(list, () =>
        list.length === 0
          ? 'No sessions. Open one with `svc sandbox open`.'
          : table(
              ['ID', 'STATUS', 'NODE', 'EXECS', 'COST', 'CREATED'],
              list.map((s) => [s.id, s.status, s.node_id ?? '-', String(s.exec_count), usd(s.cost_micro_usd), s.created_at]),
            ),
      );
    });

  sandbox
    .command('status <session>')
    .description("A session's status, execs and cost")
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const s = await onSession(id, () => keyClient(ctx).request<SessionView>('GET', `/v1/sandboxes/sessions/${encodeURIComponent(id)}`));
      ctx.out.result(s, () => sessionText(s));
    });

  sandbox
    .command('exec <session> [command...]')
    .description("Run a command in the session's workspace: its stdout and stderr are the CLI's (at its end, or as they come with --stream), and so is its exit code")
    .option('-c, --code <code>', 'code to run (sh unless --lang), instead of a command')
    .addOption(new Option('--lang <language>', 'the language of -c code').choices(LANGUAGES).default('sh'))
    .option('--timeout <seconds>', 'wall-clock limit; the command is killed at it (default 30)', seconds)
    .option('-e, --env <NAME=value>', 'an environment variable for the command (repeatable)', collectEnv)
    .option('--stdin <file>', "a file (or - for the CLI's stdin) fed to the command's stdin")
    .option('--stream', 'print output as it comes (the command then runs under a terminal: its stderr merges into stdout)')
    .addHelpText('after', '\nExamples:\n  svc sandbox exec sbx_... -- ls -la /workspace\n  svc sandbox exec sbx_... -c \'make && ./a.out\'\nExit codes: the command\'s own; 124 when killed at the time limit, 137 out of memory; the CLI\'s own (see docs/cli.md) when it did not run.')
    .action(async (id: string, command: string[], opts: { code?: string; lang: (typeof LANGUAGES)[number]; timeout?: number; env?: Record<string, string>; stdin?: string; stream?: boolean }, cmd: Command) => {
      const ctx = context(cmd);
      if ((command.length === 0) === (opts.code === undefined)) throw usageError(command.length === 0 ? 'nothing to run' : 'give a command or -c, not both', 'pass a command after the session (`-- ls -la`) or -c CODE');
      const client = keyClient(ctx);
      const body: Record<string, unknown> = command.length > 0 ? { command } : { language: opts.lang, code: opts.code };
      if (opts.timeout !== undefined) body.timeout_seconds = opts.timeout;
      if (opts.env) body.env = opts.env;
      if (opts.stdin !== undefined) body.stdin = opts.stdin === '-' ? await readStdin() : readLocal(opts.stdin).toString('utf8');
      const { meta, stdout, stderr } = await runExec(client, id, body, ctx.out.json, opts.stream === true);
      if (ctx.out.json) ctx.out.result({ ...meta, stdout, stderr }, () => '');
      ctx.out.note(`exit ${meta.exit_code ?? (meta.timed_out ? 'none (time limit)' : 'none')}  ${(meta.duration_ms / 1000).toFixed(2)} s  receipt ${meta.receipt.id}  cost ${usd(meta.cost_micro_usd)}`);
      setExitCode(exitCodeOf(meta));
    });

  registerShell(sandbox);

  sandbox
    .command('put <session> <local> [remote]')
    .description('Write a local file (or - for stdin) into the workspace, at most 8 MiB; remote defaults to its name')
    .action(async (id: string, local: string, remote: string | undefined, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const client = keyClient(ctx);
      if (local === '-' && remote === undefined) throw usageError('name the workspace path when reading stdin', 'svc sandbox put <session> - <remote path>');
      const bytes = local === '-' ? Buffer.from(await readStdin()) : readLocal(local);
      if (bytes.length > MAX_FILE_BYTES) throw usageError(`${local === '-' ? 'stdin' : local} has ${bytes.length} bytes; a workspace file takes at most ${MAX_FILE_BYTES} (8 MiB)`, 'split it, or fetch it from inside the sandbox with network access (`svc sandbox open --network`)');
      const target = filePath(remote ?? basename(local));
      if (!target) throw usageError('the workspace path names no file', 'give a path such as data/in.csv');
      const res = await onSession(id, () =>
        client.request<{ path: string; bytes: number }>('PUT', `/v1/sandboxes/sessions/${encodeURIComponent(id)}/files/${target}`, { body: new Uint8Array(bytes), headers: { 'content-type': 'application/octet-stream' } }),
      );
      ctx.out.result(res, () => `/workspace/${res.path}`);
      if (!ctx.out.json) ctx.out.note(`wrote ${res.bytes} bytes`);
    });

  sandbox
    .command('get <session> <remote> [local]')
    .description('Read a workspace file; to stdout unless a local path (or a directory) is given')
    .action(async (id: string, remote: string, local: string | undefined, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const client = keyClient(ctx);
      const target = filePath(remote);
      if (!target) throw usageError('the workspace path names no file', 'give a path such as out/result.json');
      const res = await client.raw('GET', `/v1/sandboxes/sessions/${encodeURIComponent(id)}/files/${target}`);
      if (!res.ok) throw sessionError(id, new ApiError(res.status, await res.json().catch(() => undefined), res.headers));
      const body = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
      if (local === undefined || local === '-') {
        await pipeline(body, process.stdout, { end: false });
        return;
      }
      const path = isDirectory(local) ? `${local.replace(/\/+$/, '')}/${basename(target)}` : local;
      await pipeline(body, createWriteStream(path));
      ctx.out.note(`wrote ${path} (${statSync(path).size} bytes)`);
    });

  sandbox
    .command('ls <session> [path]')
    .description('List a workspace directory (default: the workspace)')
    .action(async (id: string, path: string | undefined, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const client = keyClient(ctx);
      const l = await onSession(id, () => client.request<Listing>('GET', `/v1/sandboxes/sessions/${encodeURIComponent(id)}/files`, { query: { path: path ?? '' } }));
      ctx.out.result(l, () =>
        l.entries.length === 0 ? `${l.path}: empty` : table(['TYPE', 'SIZE', 'MODIFIED', 'NAME'], l.entries.map((e) => [e.type, String(e.size), e.mtime, e.type === 'dir' ? `${e.name}/` : e.name])),
      );
    });

  sandbox
    .command('snapshot <session>')
    .description("Snapshot the session's workspace (kept on its node); prints the snapshot id, for `svc sandbox open --snapshot`")
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const snap = await onSession(id, () => keyClient(ctx).request<{ id: string; bytes: number; sha256: string }>('POST', `/v1/sandboxes/sessions/${encodeURIComponent(id)}/snapshot`));
      ctx.out.result(snap, () => snap.id);
      if (!ctx.out.json) ctx.out.note(`snapshot ${snap.id}: ${snap.bytes} bytes, sha256 ${snap.sha256}`);
    });

  sandbox
    .command('rm <session>')
    .description('Stop the session and remove its container and workspace (its snapshots stay)')
    .action(async (id: string, _opts: unknown, cmd: Command) => {
      const ctx = context(cmd);
      const s = await onSession(id, () => keyClient(ctx).request<SessionView>('DELETE', `/v1/sandboxes/sessions/${encodeURIComponent(id)}`));
      ctx.out.result(s, () => `${s.id} ${s.status}`);
    });
}

function readLocal(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw usageError(`cannot read ${path}: ${fileProblem(err)}`);
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
