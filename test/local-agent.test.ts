import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { ADMIN_TOKEN, freePort } from './support/gateway.ts';
import { until } from './support/agent.ts';
import { freshDatabase, type TestDatabase } from './support/database.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';

/**
 * `npm start` as an operator runs it: the real control-plane process, which starts a local node agent where
 * Docker answers. `/readyz` answers 503 until that agent is connected, then 200 (and work is taken at once);
 * a SIGTERM or SIGINT (Ctrl-C) to the process group stops both in order, and the agent's containers and
 * volumes are gone when the gateway has exited.
 */
const enabled = sandboxImage();
/** `npm start`'s command (after its `prestart` build): node and its arguments, the built control plane. */
const START = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } }).scripts.start.split(' ');

beforeAll(() => {
  if (!enabled) return;
  // What `npm start`'s prestart does: the build, when a source is newer than it.
  const built = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale', 'control-plane', 'node-agent'], { encoding: 'utf8' });
  expect(built.status, built.stderr).toBe(0);
}, 120_000);

const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

const docker = (...args: string[]) => spawnSync('docker', args, { encoding: 'utf8' }).stdout.trim();
/** Containers and volumes labelled by the agent process `pid` (svc.agent.pid), as `docker ... -q` lists them. */
const leftovers = (pid: number) => ({
  containers: docker('ps', '-aq', '--filter', `label=svc.agent.pid=${pid}`),
  volumes: docker('volume', 'ls', '-q', '--filter', `label=svc.agent.pid=${pid}`),
});
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function startGateway(): Promise<{ url: string; child: ChildProcess; output: () => string; exited: Promise<number | null> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-start-'));
  const db: TestDatabase = await freshDatabase();
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // `npm start`'s command, in its own process group (as a terminal runs it).
  expect(START[0]).toBe('node');
  const child = spawn(process.execPath, START.slice(1), {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      SVC_PUBLIC_URL: url,
      SVC_DATA_DIR: dataDir,
      ...(db.url ? { DATABASE_URL: db.url } : {}),
      SVC_ADMIN_TOKEN: ADMIN_TOKEN,
      SVC_LOG_LEVEL: 'info',
      SVC_SANDBOX_IMAGE: SMALL_IMAGE,
      SVC_SANDBOX_POOL: '1',
    },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
      await exited;
    }
    await db.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return { url, child, output: () => out, exited };
}

describe.skipIf(!enabled)('npm start with a local node agent', () => {
  // SIGTERM to the group is what a service manager or `kill -TERM -<pgid>` does; Ctrl-C sends SIGINT the same way.
  it.each(['SIGTERM', 'SIGINT'] as const)('is ready only once its agent is connected, and a %s to its group leaves no container or volume', async (signal) => {
    const gw = await startGateway();
    await until('the gateway answers /healthz', async () => (await fetch(`${gw.url}/healthz`).catch(() => null))?.ok, 120_000);
    // Live, not yet ready: the local agent is still starting (a process of its own).
    const early = await fetch(`${gw.url}/readyz`);
    expect(early.status, gw.output()).toBe(503);
    expect(early.headers.get('retry-after')).toBe('1');
    expect(((await early.json()) as { error: { type: string; message: string } }).error).toMatchObject({ type: 'unavailable', message: expect.stringMatching(/local node agent/) });

    await until('the gateway is ready', async () => (await fetch(`${gw.url}/readyz`)).status === 200, 120_000);
    const ready = await fetch(`${gw.url}/readyz`);
    expect(await ready.text()).toBe('ok');

    // Ready means work is taken now: a one-shot run, then a session so that something exists to clean up.
    const anon = new SvcClient({ baseUrl: gw.url });
    const { client } = await anon.signIn(privateKeyToAccount(generatePrivateKey()));
    const api = anon.withCredential({ kind: 'key', token: (await client.createKey({ scopes: ['sandboxes'] })).key });
    const run = await api.request<{ status: string; stdout: string }>('POST', '/v1/sandboxes', { body: { code: 'echo ready' } });
    expect(run).toMatchObject({ status: 'succeeded', stdout: 'ready\n' });
    const session = await api.request<{ id: string; status: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    expect(session.status).toBe('running');

    // Built JavaScript in both processes, as ps shows them: the gateway and its child running the built agent.
    const ps = (...args: string[]) => spawnSync('ps', ['-o', 'pid=,args=', ...args], { encoding: 'utf8' }).stdout.trim().split('\n');
    expect(ps('-p', String(gw.child.pid))[0]).toMatch(/ control-plane\/dist\/main\.js$/);
    const children = ps('--ppid', String(gw.child.pid));
    expect(children).toHaveLength(1);
    expect(children[0]).toMatch(/node-agent\/dist\/svc-node\.js run --config-dir /);
    for (const line of [...ps('-p', String(gw.child.pid)), ...children]) expect(line).not.toMatch(/tsx|\.ts\b/);
    const agentPid = Number(children[0]!.trim().split(/\s+/)[0]);
    expect(agentPid).toBeGreaterThan(0);
    expect(leftovers(agentPid).containers).not.toBe(''); // the session's container (and the warm one)
    expect(leftovers(agentPid).volumes).not.toBe('');

    process.kill(-gw.child.pid!, signal);
    const code = await Promise.race([gw.exited, new Promise<'late'>((r) => setTimeout(() => r('late'), 90_000))]);
    expect(code, gw.output()).toBe(0);
    expect(alive(agentPid), 'the local agent outlived the gateway').toBe(false);
    expect(leftovers(agentPid), gw.output()).toEqual({ containers: '', volumes: '' });
  }, 300_000);
});
