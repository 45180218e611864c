import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, tcpProxy, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * A session's status follows its container: a session whose node dropped reads node_offline at once (exec
 * 503), and one whose agent came back without it (a restart) reads lost for good, with no exec and no
 * metering after; a session the agent still holds across a reconnect stays running.
 */
const enabled = sandboxImage();

let t: TestGateway;
let agent: TestAgent;
let proxy: Awaited<ReturnType<typeof tcpProxy>>;
let api: SvcClient;
let accountId: string;
const AGENT_ENV = { SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '0' };

beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: '1000', SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  const owner = await t.signIn();
  accountId = owner.accountId;
  await t.gw.services.metering.credit(accountId, 1_000_000_000, 'grant', 'lost-sessions');
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await owner.client.createKey({ scopes: ['sandboxes'] })).key } });
  proxy = await tcpProxy(t.url);
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] }, { url: proxy.url });
  agent.start(AGENT_ENV);
  await connected();
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await proxy?.close();
  await t?.close();
});

async function connected(): Promise<void> {
  await until('agent connected and heartbeating', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
}

type Session = { id: string; status: string; stopped_at: string | null; alive_seconds: number; exec_count: number; cost_micro_usd: number };
const view = (id: string) => api.request<Session>('GET', `/v1/sandboxes/sessions/${id}`);
const exec = (id: string) => api.request<{ stdout: string }>('POST', `/v1/sandboxes/sessions/${id}/exec`, { body: { code: 'echo here' } });
const balance = async () => (await t.gw.services.metering.position(accountId)).balance_micro_usd;

describe.skipIf(!enabled)('sessions whose container is gone', () => {
  it('read node_offline at once when the node drops, lost once its agent is back without them; a held session stays running', async () => {
    const a = await api.request<Session>('POST', '/v1/sandboxes/sessions', { body: {} });
    expect((await exec(a.id)).stdout).toBe('here\n');

    // The agent dies: at once (no heartbeat interval passes), the session reads node_offline and exec is 503.
    await agent.kill('SIGKILL');
    await until('channel detached', async () => !t.gw.fleet.hub.isConnected(agent.nodeId));
    expect((await view(a.id)).status).toBe('node_offline');
    expect((await api.request<Session[]>('GET', '/v1/sandboxes/sessions')).find((s) => s.id === a.id)?.status).toBe('node_offline');
    await expectApiError(exec(a.id), 503, 'no_capacity');

    // It restarts without the session's container: on connect it says what it holds, and the session is lost.
    agent.start(AGENT_ENV);
    await connected();
    const lost = await until('session lost', async () => {
      const v = await view(a.id);
      return v.status === 'lost' && v;
    });
    expect(lost.stopped_at).not.toBeNull();
    expect(lost.exec_count).toBe(1);
    const before = await balance();
    const e = await expectApiError(exec(a.id), 409, 'conflict');
    expect(e.message).toMatch(/was lost/);
    expect(e.body?.error).toMatchObject({ reason: 'session_lost' });
    await expectApiError(api.request('GET', `/v1/sandboxes/sessions/${a.id}/files`), 409, 'conflict');
    expect(await balance()).toBe(before);

    // A session the agent holds across a dropped connection stays running.
    const b = await api.request<Session>('POST', '/v1/sandboxes/sessions', { body: {} });
    proxy.cut();
    await until('channel back after the cut', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await exec(b.id).then(() => true, () => false)));
    expect((await exec(b.id)).stdout).toBe('here\n');
    expect((await view(b.id)).status).toBe('running');
    expect((await view(a.id)).status).toBe('lost');

    // Time passes: the lost session neither ages nor costs; deleting it is idempotent (stopped, as any delete).
    t.clock.advance(3600_000);
    const later = await view(a.id);
    expect({ status: later.status, alive: later.alive_seconds, cost: later.cost_micro_usd, execs: later.exec_count }).toEqual({ status: 'lost', alive: lost.alive_seconds, cost: lost.cost_micro_usd, execs: 1 });
    expect((await api.request<Session>('DELETE', `/v1/sandboxes/sessions/${a.id}`)).status).toBe('stopped');
    expect((await api.request<Session>('DELETE', `/v1/sandboxes/sessions/${a.id}`)).status).toBe('stopped');
    t.clock.advance(-3600_000);
    await api.request('DELETE', `/v1/sandboxes/sessions/${b.id}`);
  }, 180_000);
});
