import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTRPCClient, createWSClient, wsLink } from '@trpc/client';
import WebSocket from 'ws';
import { PROTOCOL_VERSION, type ServerMessage } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import type { AgentRouter } from '../../control-plane/src/fleet/channel.ts';
import { AGENT_ARGS } from './built.ts';
import { SMALL_IMAGE } from './needs.ts';
import { ADMIN_TOKEN, type TestGateway } from './gateway.ts';

/** A real `svc-node` agent process, enrolled through the API and approved by the admin. */
export interface TestAgent {
  nodeId: string;
  nodeKey: string;
  configDir: string;
  /** Starts `svc-node run` (extra arguments after `run`). */
  start(env?: Record<string, string>, args?: string[]): void;
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Resolves with the exit code once the running agent exits by itself; rejects after timeoutMs. */
  exited(timeoutMs?: number): Promise<number | null>;
  output(): string;
  /** The running agent's process id (its containers carry it as the svc.agent.pid label). */
  pid(): number | undefined;
}

const run = (args: string[], env: Record<string, string> = {}) =>
  new Promise<{ code: number | null; out: string }>((resolve) => {
    const p = spawn(process.execPath, [...AGENT_ARGS, ...args], { env: { PATH: process.env.PATH, ...env } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, out }));
  });

export async function enrollAgent(
  t: TestGateway,
  owner: SvcClient,
  body: { kinds: string[]; name?: string; speed_factor?: number; models?: string[]; model_map?: Record<string, string> } = { kinds: ['sandbox'] },
  opts: { approve?: boolean; /** The control-plane URL the agent dials (a proxy, say); default t.url. */ url?: string } = {},
): Promise<TestAgent> {
  const enrolled = await owner.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body });
  if (opts.approve !== false) {
    const admin = new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });
    await admin.request('POST', '/v1/admin/nodes/approve', { body: { node_id: enrolled.node.id, approved: true } });
  }
  return agentWithKey(opts.url ?? t.url, enrolled.node_key, enrolled.node.id);
}

/** An agent configured (with the real `svc-node enroll --key`) to use a given key, enrolled or not. */
export async function agentWithKey(url: string, nodeKey: string, nodeId = ''): Promise<TestAgent> {
  const configDir = mkdtempSync(join(tmpdir(), 'svc-node-'));
  const e = await run(['enroll', '--config-dir', configDir, '--url', url, '--key', nodeKey, '--data-dir', join(configDir, 'data')]);
  if (e.code !== 0) throw new Error(`svc-node enroll failed: ${e.out}`);
  let child: ChildProcess | undefined;
  let out = '';
  return {
    nodeId,
    nodeKey,
    configDir,
    start(env: Record<string, string> = {}, args: string[] = []) {
      // No warm sandbox pool unless a test asks for one: fleet tests need no containers.
      child = spawn(process.execPath, [...AGENT_ARGS, 'run', '--config-dir', configDir, ...args], { env: { PATH: process.env.PATH, SVC_SANDBOX_POOL: '0', ...env } });
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
    exited(timeoutMs = 30_000) {
      const c = child;
      if (!c) return Promise.reject(new Error('agent not started'));
      if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve(c.exitCode);
      return new Promise<number | null>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`agent still running after ${timeoutMs} ms:\n${out}`)), timeoutMs);
        c.once('exit', (code) => {
          clearTimeout(timer);
          resolve(code);
        });
      });
    },
    output: () => out,
    pid: () => child?.pid,
  };
}

/**
 * A TCP relay between agents and a control plane: `cut()` drops every connection through it (a network
 * blip: the agent stays up and reconnects), `block()` also refuses new ones until `unblock()`, `retarget()`
 * sends new ones elsewhere.
 */
export async function tcpProxy(target: string): Promise<{ url: string; cut(): void; strand(): void; block(): void; unblock(): void; retarget(url: string): void; close(): Promise<void> }> {
  let { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const pairs = new Set<{ client: Socket; upstream: Socket; stranded: boolean }>();
  let blocked = false;
  const server = createServer((client) => {
    if (blocked) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    const pair = { client, upstream, stranded: false };
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => {
      pairs.delete(pair);
      if (!pair.stranded) upstream.destroy();
    });
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const cut = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    cut,
    /**
     * The client's side closes; the target's stays open and hears nothing more (what the target sees when the
     * client's host or network goes away without a close reaching it). `close()` ends it.
     */
    strand: () => {
      for (const pair of [...pairs]) {
        pair.stranded = true;
        pair.client.unpipe(pair.upstream);
        pair.upstream.unpipe(pair.client);
        pair.upstream.pause();
        pair.client.destroy();
      }
    },
    block: () => {
      blocked = true;
      cut();
    },
    unblock: () => {
      blocked = false;
    },
    /** New connections go to another address (an agent moving to another control-plane process). */
    retarget: (url: string) => {
      ({ hostname, port } = new URL(url));
    },
    close: async () => {
      cut();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Polls a condition that depends on another process (an agent connecting); real processes need real time. */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  // Looks again after 10 ms, then less often (up to every 100 ms): most conditions hold within a few ms.
  for (let pause = 10; ; pause = Math.min(100, pause * 2)) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, pause));
  }
}

/**
 * A real sandbox agent for `owner` on `t`, running the small busybox image with a warm pool of one, once it is
 * connected and has heartbeated (it takes jobs from then on).
 */
export async function startSandboxAgent(t: TestGateway, owner: SvcClient): Promise<TestAgent> {
  const agent = await enrollAgent(t, owner, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  await until('sandbox agent connected and heartbeating', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
  return agent;
}

/** Waits until node `nodeId`'s agent is connected to `t` and has heartbeated (it takes jobs from then on). */
export async function untilOnline(t: TestGateway, nodeId: string): Promise<void> {
  await until(`${nodeId} online`, async () => t.gw.fleet.hub.isConnected(nodeId) && (await t.gw.database.db.selectFrom('nodes').select('last_heartbeat_at').where('id', '=', nodeId).executeTakeFirst())?.last_heartbeat_at);
}

/**
 * An agent that only listens: enrolled (with `enroll`'s body), approved, one heartbeat, connected to the
 * channel; it records the messages the control plane sends and never answers a job. `close` disconnects
 * and disables the node.
 */
export async function muteAgent(t: TestGateway, owner: SvcClient, enroll: Record<string, unknown>): Promise<{ nodeId: string; got: ServerMessage[]; close(): Promise<void> }> {
  const { node, node_key } = await owner.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body: enroll });
  await new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } }).request('POST', '/v1/admin/nodes/approve', { body: { node_id: node.id, approved: true } });
  const caps = { cpu: { cores: 1, model: 't', load: 0 }, memory: { total_bytes: 1, available_bytes: 1 }, disk: { total_bytes: 1, available_bytes: 1 }, gpus: [], docker: { reachable: false, version: null }, os: 't' };
  await fetch(`${t.url}/v1/nodes/heartbeat`, { method: 'POST', headers: { authorization: `Bearer ${node_key}`, 'content-type': 'application/json' }, body: JSON.stringify({ capabilities: caps, load: { running_jobs: 0 }, agent_version: 'mute' }) });
  const ws = createWSClient({ url: `${t.url.replace('http', 'ws')}/v1/nodes/channel`, WebSocket: WebSocket as unknown as typeof globalThis.WebSocket, connectionParams: { node_key, protocol_version: String(PROTOCOL_VERSION), agent_version: 'mute' } });
  const got: ServerMessage[] = [];
  const sub = createTRPCClient<AgentRouter>({ links: [wsLink({ client: ws })] }).jobs.subscribe(undefined, { onData: (m) => got.push(m as ServerMessage) });
  const close = async () => {
    sub.unsubscribe();
    ws.close();
    await owner.request('POST', `/v1/nodes/${node.id}/disabled`, { body: { set: true } });
  };
  try {
    await until('mute agent connected', async () => t.gw.fleet.hub.isConnected(node.id));
  } catch (e) {
    await close();
    throw e;
  }
  return { nodeId: node.id, got, close };
}
