import { spawn, type ChildProcess } from 'node:child_process';
import { GATEWAY_ARGS } from './built.ts';
import { ADMIN_TOKEN, freePort } from './gateway.ts';

type Share = { dataDir: string; databaseUrl: string | undefined };

/** The built control plane in a child process on the given data dir and database. */
function spawnGateway(share: Share, env: Record<string, string>, port: number, stderr: 'ignore' | 'pipe'): ChildProcess {
  return spawn(process.execPath, GATEWAY_ARGS, {
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      SVC_DATA_DIR: share.dataDir,
      ...(share.databaseUrl ? { DATABASE_URL: share.databaseUrl } : {}),
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_LOG_LEVEL: 'silent',
      SVC_LOCAL_AGENT: 'off',
      ...env,
    },
    stdio: ['ignore', 'ignore', stderr],
  });
}

/** Polls the child's /healthz (bounded): true once it answers, false once the child exited. */
async function cameUp(url: string, child: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 90_000;
  while (!(await fetch(`${url}/healthz`).then((r) => r.ok, () => false))) {
    if (child.exitCode !== null) return false;
    if (Date.now() > deadline) throw new Error('the gateway child process neither came up nor exited');
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

async function killed(child: ChildProcess): Promise<void> {
  child.kill('SIGKILL');
  if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
}

/**
 * A control plane in a real child process (the built `control-plane/dist/main.js`) on a data dir and database another
 * gateway of the test created, for tests that kill it (SIGKILL). Resolves once it answers /healthz.
 */
export async function startChildGateway(share: Share, env: Record<string, string> = {}): Promise<{ url: string; child: ChildProcess; kill(): Promise<void> }> {
  const port = await freePort();
  const child = spawnGateway(share, env, port, 'ignore');
  const url = `http://127.0.0.1:${port}`;
  if (!(await cameUp(url, child))) throw new Error('the gateway child process did not come up');
  return { url, child, kill: () => killed(child) };
}

/**
 * Boots a child control plane that is expected to refuse to start: its exit code and what it wrote to stderr,
 * or `booted: true` (and the child killed) when it came up instead.
 */
export async function childGatewayExit(share: Share, env: Record<string, string> = {}): Promise<{ booted: boolean; code: number | null; stderr: string }> {
  const port = await freePort();
  const child = spawnGateway(share, env, port, 'pipe');
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
  const closed = new Promise<void>((r) => child.once('close', () => r())); // exited, and stderr read to its end
  if (await cameUp(`http://127.0.0.1:${port}`, child)) {
    await killed(child);
    return { booted: true, code: null, stderr };
  }
  await closed;
  return { booted: false, code: child.exitCode, stderr };
}
