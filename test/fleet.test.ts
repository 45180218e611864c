import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTRPCClient, createWSClient, wsLink } from '@trpc/client';
import WebSocket from 'ws';
import { SvcClient } from '@svc/shared/client';
import type { AgentRouter } from '../control-plane/src/fleet/channel.ts';
import { ADMIN_TOKEN, fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { expectApiError } from './support/expect-error.ts';

let t: TestGateway;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
const agents: TestAgent[] = [];
beforeAll(async () => {
  t = await startTestGateway({ persistent: true, reconnectGraceMs: 1500 });
  owner = await t.signIn();
});
afterAll(async () => {
  for (const a of agents) await a.kill();
  await t?.close();
});

type NodeEntry = { id: string; type: string; status?: string; reliability?: number | null; clamp_count?: number; jobs_dispatched?: number };
const registry = async () => (await t.client.request<NodeEntry[]>('GET', '/v1/nodes'));
const statusOf = async (id: string) => (await registry()).find((n) => n.id === id)?.status;
const admin = () => new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });

/** No eligible node: 503 no_capacity, retryable, with a retry-after (seconds) in the body and, over HTTP, the header. */
async function expectNoCapacity(): Promise<void> {
  const e = await expectApiError(t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: [] }, timeoutMs: 1000 }), 503, 'no_capacity');
  expect(e.body?.error).toMatchObject({ retryable: true, retry_after: 5 });
  const { key } = await fundedKey(t, 1_000_000);
  const res = await fetch(`${t.url}/v1/sandboxes`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ language: 'sh', code: 'true' }) });
  expect(res.status).toBe(503);
  expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'no_capacity', retryable: true, retry_after: 5 });
  expect(res.headers.get('retry-after')).toBe('5');
}

async function startAgent(body: Parameters<typeof enrollAgent>[2] = { kinds: ['sandbox'] }): Promise<TestAgent> {
  const a = await enrollAgent(t, owner.client, body);
  agents.push(a);
  a.start();
  await until(`${a.nodeId} connected`, async () => t.gw.fleet.hub.isConnected(a.nodeId) && (await statusOf(a.nodeId)) === 'online');
  return a;
}

describe('enrollment and registry', () => {
  it('reveals the node key once, stores it hashed, and lists the node publicly without secrets', async () => {
    const res = await owner.client.request<{ node: { id: string; key_prefix: string }; node_key: string }>('POST', '/v1/nodes/enroll', {
      body: { kinds: ['inference'], models: ['llama-3-8b'], model_map: { 'llama-3-8b': 'llama3:8b' }, speed_factor: 2, name: 'gpu-box' },
    });
    expect(res.node_key).toMatch(/^nk-svc_/);
    const row = await t.gw.database.db.selectFrom('nodes').selectAll().where('id', '=', res.node.id).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(res.node_key);
    const list = await registry();
    expect(list[0]).toMatchObject({ id: 'gateway', type: 'gateway' });
    expect(list[1]).toMatchObject({ type: 'tee_backend', configured: false });
    const entry = list.find((n) => n.id === res.node.id)!;
    expect(entry).toMatchObject({ kinds: ['inference'], models: ['llama-3-8b'], speed_factor: 2, clamp_count: 0, status: 'pending_approval', reliability: null });
    expect(JSON.stringify(list)).not.toMatch(/nk-svc_|acct_|key_prefix|endpoint|capabilities/);
  });

  it('refuses bad enrollments, wrong keys, malformed heartbeats, non-admin approval and non-owner gates', async () => {
    await expectApiError(owner.client.request('POST', '/v1/nodes/enroll', { body: { kinds: ['gpu'] } }), 400, 'invalid_request');
    await expectApiError(owner.client.request('POST', '/v1/nodes/enroll', { body: { kinds: ['inference'] } }), 400, 'invalid_request');
    const { node, node_key } = await owner.client.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    const hb = (key: string, body: unknown) => fetch(`${t.url}/v1/nodes/heartbeat`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await hb('nk-svc_wrong', {})).status).toBe(401);
    const bad = await hb(node_key, { capabilities: { cpu: 'lots' }, load: { running_jobs: 0 }, agent_version: '1' });
    expect(bad.status).toBe(400);
    const row = await t.gw.database.db.selectFrom('nodes').selectAll().where('id', '=', node.id).executeTakeFirstOrThrow();
    expect(row.last_heartbeat_at).toBeNull();
    expect(row.capabilities).toBeNull();
    await expectApiError(owner.client.request('POST', '/v1/admin/nodes/approve', { body: { node_id: node.id, approved: true } }), 401, 'invalid_credential');
    const stranger = await t.signIn();
    // Another's node and an unknown node answer alike: the same 404 with the same body.
    const foreign = await expectApiError(stranger.client.request('POST', `/v1/nodes/${node.id}/draining`, { body: { set: true } }), 404, 'not_found');
    const unknown = await expectApiError(stranger.client.request('POST', '/v1/nodes/node_nope/draining', { body: { set: true } }), 404, 'not_found');
    const shape = (b: typeof foreign.body) => ({ ...b?.error, request_id: undefined });
    expect(shape(foreign.body)).toEqual(shape(unknown.body));
    expect((await t.gw.fleet.registry.get(node.id)).draining).toBe(false);
    await expectApiError(owner.client.request('POST', `/v1/nodes/${node.id}/exploding`, { body: { set: true } }), 400, 'invalid_request');
    await expectApiError(admin().request('POST', '/v1/admin/nodes/approve', { body: { node_id: 'node_nope', approved: true } }), 404, 'not_found');
  });

  it('refuses an agent of another protocol version with a message the operator understands', async () => {
    const { node_key } = await owner.client.request<{ node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    const ws = createWSClient({
      url: t.url.replace('http', 'ws') + '/v1/nodes/channel',
      WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
      connectionParams: { node_key, protocol_version: '99', agent_version: 'test' },
    });
    const client = createTRPCClient<AgentRouter>({ links: [wsLink({ client: ws })] });
    const err = await client.hello.mutate({ running_jobs: [] }).then(() => null, (e: Error) => e);
    ws.close();
    expect(err?.message).toMatch(/protocol version 99 is not supported.*speaks version 1/);
  });
});

describe('a real agent', () => {
  let a: TestAgent;
  it('heartbeats on start, takes a job over the channel and streams its output', async () => {
    a = await startAgent();
    const row = await t.gw.database.db.selectFrom('nodes').selectAll().where('id', '=', a.nodeId).executeTakeFirstOrThrow();
    expect(row.capabilities).toMatchObject({ cpu: { cores: expect.any(Number) }, docker: { reachable: expect.any(Boolean) } });
    const chunks: string[] = [];
    const r = await t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['a', 'b', 'c'] }, timeoutMs: 10_000, onOutput: (o) => chunks.push(o.data) });
    expect(r.nodeId).toBe(a.nodeId);
    expect(r.result).toEqual({ chunks: 3 });
    expect(chunks).toEqual(['a', 'b', 'c']);
    const entry = (await registry()).find((n) => n.id === a.nodeId)!;
    expect(entry.reliability).toBe(1); // the plain share of jobs that ended well (no smoothing in public)
    expect(entry.jobs_dispatched).toBe(1);
  });

  it("an agent sends the outputs gathered while one message was on its way in the next, in order and whole", async () => {
    const sent = Array.from({ length: 1000 }, (_, i) => `chunk ${i} `);
    const got: string[] = [];
    const before = t.gw.fleet.hub.outputMessages;
    await t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: sent }, timeoutMs: 10_000, nodeId: a.nodeId, onOutput: (o) => got.push(o.data) });
    expect(got).toEqual(sent);
    // diag.echo emits all at once: the first goes alone, the other 999 in messages of at most 512.
    expect(t.gw.fleet.hub.outputMessages - before).toBe(3);
  });

  it('goes offline when its agent is killed (3 missed heartbeats) and comes back when restarted', async () => {
    await a.kill();
    await until('channel detached', async () => !t.gw.fleet.hub.isConnected(a.nodeId));
    expect(await statusOf(a.nodeId)).toBe('online');
    t.clock.advance(3 * 60_000 + 1);
    expect(await statusOf(a.nodeId)).toBe('offline');
    await expectNoCapacity();
    a.start();
    await until('back online', async () => t.gw.fleet.hub.isConnected(a.nodeId) && (await statusOf(a.nodeId)) === 'online');
    const r = await t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 10_000 });
    expect(r.nodeId).toBe(a.nodeId);
  });

  it('times a job out and cancels it on the node', async () => {
    const e = await expectApiError(t.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload: { ms: 60_000 }, timeoutMs: 300 }), 504, 'upstream_timeout');
    const job = await t.gw.database.db.selectFrom('jobs').selectAll().where('id', '=', String(e.body?.error.job_id)).executeTakeFirstOrThrow();
    expect(job.status).toBe('timed_out');
  });
});

describe('drain, disable and scheduling', () => {
  it('a draining node finishes its running job and new work goes elsewhere; a disabled node takes none', async () => {
    const slow = await startAgent({ kinds: ['sandbox'], speed_factor: 5 });
    const other = await startAgent({ kinds: ['sandbox'], speed_factor: 1 });
    // The scheduler prefers the declared-faster node.
    const running = t.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload: { ms: 1500 }, timeoutMs: 10_000, nodeId: slow.nodeId });
    await until('job running', async () => t.gw.fleet.hub.openJobs().some((j) => j.nodeId === slow.nodeId));
    await owner.client.request('POST', `/v1/nodes/${slow.nodeId}/draining`, { body: { set: true } });
    const next = await t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: [] }, timeoutMs: 10_000, onOutput: () => undefined });
    expect(next.nodeId).not.toBe(slow.nodeId);
    expect((await running).result).toEqual({ waited_ms: 1500 });
    expect(await statusOf(slow.nodeId)).toBe('draining');
    await owner.client.request('POST', `/v1/nodes/${slow.nodeId}/draining`, { body: { set: false } });
    const back = await t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: [] }, timeoutMs: 10_000 });
    expect(back.nodeId).toBe(slow.nodeId);

    for (const n of agents) await owner.client.request('POST', `/v1/nodes/${n.nodeId}/disabled`, { body: { set: true } });
    await expectNoCapacity();
    for (const n of agents) await owner.client.request('POST', `/v1/nodes/${n.nodeId}/disabled`, { body: { set: false } });
    // An unapproved node takes nothing either.
    await admin().request('POST', '/v1/admin/nodes/approve', { body: { node_id: slow.nodeId, approved: false } });
    expect((await t.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: [] }, timeoutMs: 10_000 })).nodeId).not.toBe(slow.nodeId);
    await admin().request('POST', '/v1/admin/nodes/approve', { body: { node_id: slow.nodeId, approved: true } });
  });

  it('a job whose node drops before any output is dispatched once more elsewhere', async () => {
    const nodes = agents;
    const job = t.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload: { ms: 2000 }, timeoutMs: 20_000 });
    const open = await until('job dispatched', async () => t.gw.fleet.hub.openJobs()[0]);
    const victim = nodes.find((n) => n.nodeId === open.nodeId)!;
    await victim.kill();
    const r = await job;
    expect(r.nodeId).not.toBe(victim.nodeId);
    const attempts = await t.gw.database.db.selectFrom('jobs').selectAll().where('node_id', '=', victim.nodeId).where('id', '=', open.jobId).executeTakeFirstOrThrow();
    expect(attempts.status).toBe('failed');
    expect(attempts.error).toBe('node lost');
    victim.start();
    await until('victim back', async () => t.gw.fleet.hub.isConnected(victim.nodeId));
  });
});

describe('control-plane restart', () => {
  it('loses no node, and agents reconnect by themselves', async () => {
    const before = (await registry()).filter((n) => n.type === 'node').map((n) => n.id).sort();
    const port = Number(new URL(t.url).port);
    const share = { databaseUrl: (t as unknown as { databaseUrl: string | undefined }).databaseUrl, dataDir: (t as unknown as { dataDir: string }).dataDir };
    await t.stop();
    const restarted = await startTestGateway({ share, port, clock: t.clock, reconnectGraceMs: 1500 });
    const oldClose = t.close;
    Object.assign(t, { gw: restarted.gw, client: restarted.client, close: async () => { await restarted.stop(); await oldClose(); } });
    const after = (await registry()).filter((n) => n.type === 'node').map((n) => n.id).sort();
    expect(after).toEqual(before);
    const live = agents.filter((a) => a.output().length >= 0);
    await until('agents reconnected', async () => live.filter((a) => restarted.gw.fleet.hub.isConnected(a.nodeId)).length === live.length, 60_000).catch((e) => {
      for (const a of live) console.log(a.nodeId, a.output().slice(-1500));
      throw e;
    });
    const r = await restarted.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['after restart'] }, timeoutMs: 10_000 });
    expect(r.result).toEqual({ chunks: 1 });
  }, 90_000);
});
