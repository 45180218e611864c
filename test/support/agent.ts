import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SvcClient } from '@svc/shared/client';
import { ADMIN_TOKEN, type TestGateway } from './gateway.ts';

/** A real `svc-node` agent process, enrolled through the API and approved by the admin. */
export interface TestAgent {
  nodeId: string;
  nodeKey: string;
  configDir: string;
  start(env?: Record<string, string>): void;
  kill(signal?: NodeJS.Signals): Promise<void>;
  output(): string;
}

const run = (args: string[], env: Record<string, string> = {}) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'node-agent/src/cli.ts', ...args], { env: { PATH: process.env.PATH, ...env } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, out }));
  });

export async function enrollAgent(
  t: TestGateway,
  owner: SvcClient,
  body: { kinds: string[]; name?: string; speed_factor?: number; models?: string[] } = { kinds: ['sandbox'] },
  opts: { approve?: boolean } = {},
): Promise<TestAgent> {
  const enrolled = await owner.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body });
  if (opts.approve !== false) {
    const admin = new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });
    await admin.request('POST', '/v1/admin/nodes/approve', { body: { node_id: enrolled.node.id, approved: true } });
  }
  const configDir = mkdtempSync(join(tmpdir(), 'svc-node-'));
  const e = await run(['enroll', '--config-dir', configDir, '--url', t.url, '--key', enrolled.node_key, '--data-dir', join(configDir, 'data')]);
  if (e.code !== 0) throw new Error(`svc-node enroll failed: ${e.out}`);
  let child: ChildProcess | undefined;
  let out = '';
  return {
    nodeId: enrolled.node.id,
    nodeKey: enrolled.node_key,
    configDir,
    start(env: Record<string, string> = {}) {
      // No warm sandbox pool unless a test asks for one: fleet tests need no containers.
      child = spawn(process.execPath, ['--import', 'tsx', 'node-agent/src/cli.ts', 'run', '--config-dir', configDir], { env: { PATH: process.env.PATH, SVC_SANDBOX_POOL: '0', ...env } });
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (out += d));
    },
    async kill(signal: NodeJS.Signals = 'SIGKILL') {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      await new Promise<void>((r) => {
        c.once('exit', () => r());
        c.kill(signal);
      });
    },
    output: () => out,
  };
}

/** Polls a condition that depends on another process (an agent connecting); real processes need real time. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
