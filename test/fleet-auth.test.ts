import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTRPCClient, createWSClient, wsLink, TRPCClientError } from '@trpc/client';
import WebSocket from 'ws';
import { HEARTBEAT_SECONDS, PROTOCOL_VERSION } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import type { AgentRouter } from '../control-plane/src/fleet/channel.ts';
import { HOUSE_ACCOUNT } from '../control-plane/src/fleet/registry.ts';
import { ADMIN_TOKEN, startTestGateway, type TestGateway } from './support/gateway.ts';
import { agentWithKey, enrollAgent, until, type TestAgent } from './support/agent.ts';
import { expectApiError } from './support/expect-error.ts';
import { TEST_CAPABILITIES, nodeHeartbeat } from './support/node-heartbeat.ts';

/**
 * Node-key auth and refusals: a wrong key is 401 on the heartbeat and refused on the channel; a suspended
 * owner's key (the spec has no node-key revoke route) is 403 `account_suspended` and refused until the
 * suspension is lifted; a real agent refused for its key or its protocol version says why and exits 3 (the
 * unit's RestartPreventExitStatus), one refused for a suspension waits it out; house nodes.
 */
let t: TestGateway;
const agents: TestAgent[] = [];
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => {
  for (const a of agents) await a.kill();
  await t?.close();
});

const admin = () => new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });
const suspend = (accountId: string, suspended: boolean) => admin().request('POST', '/v1/admin/accounts/suspend', { body: { account_id: accountId, suspended, reason: 'test' } });
const wellFormedKey = () => `nk-svc_${randomBytes(40).toString('base64url').slice(0, 43)}`;
const heartbeat = (key: string) => nodeHeartbeat(t.url, key);

/** Dials the channel as an agent would and calls hello: the answer, or the refusal (code and message). */
async function channelHello(nodeKey: string, protocolVersion = PROTOCOL_VERSION): Promise<{ ok: true; node_id: string } | { ok: false; code: string | undefined; message: string }> {
  const ws = createWSClient({
    url: `${t.url.replace('http', 'ws')}/v1/nodes/channel`,
    WebSocket: WebSocket as unknown as typeof globalThis.WebSocket,
    connectionParams: { node_key: nodeKey, protocol_version: String(protocolVersion), agent_version: 'test' },
  });
  const client = createTRPCClient<AgentRouter>({ links: [wsLink({ client: ws })] });
  try {
    const r = await client.hello.mutate({ running_jobs: [] });
    return { ok: true, node_id: r.node_id };
  } catch (e) {
    const code = e instanceof TRPCClientError ? (e.data as { code?: string } | undefined)?.code : undefined;
    return { ok: false, code, message: (e as Error).message };
  } finally {
    ws.close();
  }
}

describe('wrong and revoked node keys', () => {
  it('a wrong key is 401 on the heartbeat and refused on the channel', async () => {
    const key = wellFormedKey();
    const hb = await heartbeat(key);
    expect(hb.status).toBe(401);
    expect(((await hb.json()) as { error: { type: string } }).error.type).toBe('invalid_credential');
    expect(await channelHello(key)).toEqual({ ok: false, code: 'UNAUTHORIZED', message: 'Unknown node key' });
  });

  it("suspending the owner's account refuses its node keys (403, channel refused) until the suspension is lifted", async () => {
    const owner = await t.signIn();
    const { node, node_key } = await owner.client.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    expect((await heartbeat(node_key)).status).toBe(200);
    expect(await channelHello(node_key)).toEqual({ ok: true, node_id: node.id });

    await suspend(owner.accountId, true);
    const hb = await heartbeat(node_key);
    expect(hb.status).toBe(403);
    expect(((await hb.json()) as { error: { type: string; message: string } }).error).toMatchObject({ type: 'account_suspended', message: expect.stringMatching(/refused while the node's owner account is suspended/) });
    const refused = await channelHello(node_key);
    expect(refused).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect((refused as { message: string }).message).toMatch(/refused while the node's owner account is suspended/);
    // Nor does the scheduler see it (an already open channel gets no new work).
    expect((await t.gw.fleet.registry.view.snapshots()).map((n) => n.id)).not.toContain(node.id);

    await suspend(owner.accountId, false);
    expect((await heartbeat(node_key)).status).toBe(200);
    expect(await channelHello(node_key)).toEqual({ ok: true, node_id: node.id });
  });

  it('the heartbeat answer names the 60-second cadence', async () => {
    const owner = await t.signIn();
    const { node_key } = await owner.client.request<{ node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
    const body = (await (await heartbeat(node_key)).json()) as { next_heartbeat_seconds: number };
    expect(HEARTBEAT_SECONDS).toBe(60);
    expect(body.next_heartbeat_seconds).toBe(HEARTBEAT_SECONDS);
  });
});

describe('a real agent refused for good exits 3 with a reason an operator can act on', () => {
  const refused = /svc-node: not retrying \(exit status 3\); fix the cause above, then start the agent again/;

  it('an incompatible protocol version', async () => {
    const owner = await t.signIn();
    const a = await enrollAgent(t, owner.client);
    agents.push(a);
    a.start({}, ['--protocol-version', '99']);
    expect(await a.exited()).toBe(3);
    expect(a.output()).toMatch(
      /svc-node: the control plane refused this agent: agent protocol version 99 is not supported: this control plane speaks version 1; install the matching agent release/,
    );
    expect(a.output()).toMatch(refused);
    expect(a.output()).not.toContain(a.nodeKey);
  });

  it('a wrong node key', async () => {
    const a = await agentWithKey(t.url, wellFormedKey());
    agents.push(a);
    a.start();
    expect(await a.exited()).toBe(3);
    expect(a.output()).toMatch(/svc-node: the control plane refused the node key: Unknown node key/);
    expect(a.output()).toMatch(refused);
  });

  it("an agent whose owner is suspended keeps retrying, and comes back by itself once the suspension is lifted", async () => {
    const owner = await t.signIn();
    const a = await enrollAgent(t, owner.client);
    agents.push(a);
    await suspend(owner.accountId, true);
    a.start();
    await until('the refusal logged', async () => /refuses the node for now: This node key is refused while the node's owner account is suspended; retrying with backoff/.test(a.output()));
    await expect(a.exited(1000)).rejects.toThrow(/still running/);
    expect(t.gw.fleet.hub.isConnected(a.nodeId)).toBe(false);
    await suspend(owner.accountId, false);
    await until('connected', async () => t.gw.fleet.hub.isConnected(a.nodeId), 20_000);
    expect(a.output()).not.toMatch(/not retrying/);
  });

  it('an accepted agent keeps running (the refusals above are not a startup failure)', async () => {
    const owner = await t.signIn();
    const a = await enrollAgent(t, owner.client);
    agents.push(a);
    a.start();
    await until('connected', async () => t.gw.fleet.hub.isConnected(a.nodeId));
    await expect(a.exited(1000)).rejects.toThrow(/still running/);
  });
});

describe('house nodes', () => {
  it('POST /v1/admin/nodes/enroll enrolls under the house-ops account, shown as house', async () => {
    await expectApiError((await t.signIn()).client.request('POST', '/v1/admin/nodes/enroll', { body: { kinds: ['sandbox'] } }), 401, 'invalid_credential');
    const first = await admin().request<{ node: { id: string; house: boolean; approved: boolean; status: string }; node_key: string }>('POST', '/v1/admin/nodes/enroll', {
      body: { kinds: ['sandbox'], name: 'house-1' },
    });
    const second = await admin().request<{ node: { id: string; house: boolean } }>('POST', '/v1/admin/nodes/enroll', { body: { kinds: ['inference'], models: ['m1'] } });
    expect(first.node_key).toMatch(/^nk-svc_[A-Za-z0-9_-]{43}$/);
    expect(first.node).toMatchObject({ house: true, approved: false, status: 'pending_approval' });
    expect(second.node.house).toBe(true);
    const rows = await t.gw.database.db.selectFrom('nodes').select(['id', 'account_id', 'house']).where('id', 'in', [first.node.id, second.node.id]).execute();
    expect(rows.map((r) => ({ account_id: r.account_id, house: r.house }))).toEqual([
      { account_id: HOUSE_ACCOUNT, house: true },
      { account_id: HOUSE_ACCOUNT, house: true },
    ]);
    // The registry shows both as the house account's own; the public list shows them without the owner.
    const owned = await t.gw.fleet.registry.listOwned(HOUSE_ACCOUNT);
    expect(owned.filter((n) => [first.node.id, second.node.id].includes(n.id)).map((n) => n.house)).toEqual([true, true]);
    const pub = await t.client.request<Array<{ id: string; status?: string }>>('GET', '/v1/nodes');
    expect(pub.find((n) => n.id === first.node.id)).toMatchObject({ status: 'pending_approval' });
    expect(JSON.stringify(pub)).not.toContain(HOUSE_ACCOUNT);
    // Its key works like any node key.
    expect((await heartbeat(first.node_key)).status).toBe(200);
  });

  it('POST /v1/admin/nodes/gate drains and disables any node, the house node included; bad bodies name their field', async () => {
    const house = (await admin().request<{ node: { id: string } }>('POST', '/v1/admin/nodes/enroll', { body: { kinds: ['sandbox'], name: 'house-gate' } })).node.id;
    const owner = await t.signIn();
    const owned = (await owner.client.request<{ node: { id: string } }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } })).node.id;
    // The owner's gate route takes a session, not the admin token.
    await expectApiError(admin().request('POST', `/v1/nodes/${house}/draining`, { body: { set: true } }), 401, 'wrong_credential_kind');
    const gate = (body: Record<string, unknown>) => admin().request<{ id: string; draining: boolean; disabled: boolean; house: boolean }>('POST', '/v1/admin/nodes/gate', { body });
    expect(await gate({ node_id: house, gate: 'draining', set: true })).toMatchObject({ id: house, house: true, draining: true, disabled: false });
    expect(await gate({ node_id: house, gate: 'disabled', set: true })).toMatchObject({ id: house, draining: true, disabled: true });
    expect(await gate({ node_id: house, gate: 'draining', set: false })).toMatchObject({ draining: false, disabled: true });
    expect(await gate({ node_id: owned, gate: 'disabled', set: true })).toMatchObject({ id: owned, house: false, disabled: true });
    expect((await t.gw.fleet.registry.get(owned)).disabled).toBe(true);
    expect((await t.gw.fleet.registry.get(house)).disabled).toBe(true);

    for (const [body, param] of [
      [{ gate: 'draining', set: true }, 'node_id'],
      [{ node_id: house, gate: 'exploding', set: true }, 'gate'],
      [{ node_id: house, gate: 'draining' }, 'set'],
      [{ node_id: house, gate: 'draining', set: 'yes' }, 'set'],
      [{ node_id: house, gate: 'draining', set: true, extra: 1 }, 'extra'],
    ] as const) {
      const e = await expectApiError(gate(body), 400, 'invalid_request');
      expect({ body, param: e.param }).toEqual({ body, param });
    }
    await expectApiError(gate({ node_id: 'node_nope', gate: 'draining', set: true }), 404, 'not_found');
    await expectApiError(owner.client.request('POST', '/v1/admin/nodes/gate', { body: { node_id: owned, gate: 'draining', set: true } }), 401, 'invalid_credential');
    expect((await t.gw.fleet.registry.get(owned)).draining).toBe(false);
  });

  it("GET /v1/nodes/mine is the caller's nodes only; GET /v1/admin/nodes every node; the admin metrics count the fleet online per kind and its sandbox capacity", async () => {
    const a = await t.signIn();
    const b = await t.signIn();
    const enroll = (c: SvcClient, body: Record<string, unknown>) => c.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body });
    const a1 = await enroll(a.client, { kinds: ['sandbox'], name: 'a1' });
    const a2 = await enroll(a.client, { kinds: ['sandbox', 'inference'], models: ['m'], name: 'a2' });
    const b1 = await enroll(b.client, { kinds: ['inference'], models: ['m'], name: 'b1' });
    const mine = await a.client.request<Array<{ id: string; approved: boolean; running_jobs: number; draining: boolean }>>('GET', '/v1/nodes/mine');
    expect(mine.map((n) => n.id).sort()).toEqual([a1.node.id, a2.node.id].sort()); // enrolled at one clock time: by id
    expect(mine.find((n) => n.id === a1.node.id)).toMatchObject({ approved: false, running_jobs: 0, draining: false });
    expect(JSON.stringify(mine)).not.toContain(a1.node_key);
    expect((await b.client.request<Array<{ id: string }>>('GET', '/v1/nodes/mine')).map((n) => n.id)).toEqual([b1.node.id]);
    await expectApiError(t.client.request('GET', '/v1/nodes/mine'), 401, 'authentication_required');
    await expectApiError(admin().request('GET', '/v1/nodes/mine'), 401, 'wrong_credential_kind');

    const house = (await admin().request<{ node: { id: string } }>('POST', '/v1/admin/nodes/enroll', { body: { kinds: ['sandbox'], name: 'house-listed' } })).node.id;
    const all = await admin().request<Array<{ id: string; house: boolean }>>('GET', '/v1/admin/nodes');
    expect(all.map((n) => n.id)).toEqual(expect.arrayContaining([a1.node.id, a2.node.id, b1.node.id, house]));
    expect(all.find((n) => n.id === house)!.house).toBe(true);
    await expectApiError(a.client.request('GET', '/v1/admin/nodes'), 401, 'invalid_credential');

    type Fleet = { online_by_kind: Record<string, number>; running_jobs: number; sandbox_capacity: { nodes: number; cpu_cores: number; memory_total_bytes: number } };
    const fleet = async () => (await admin().request<{ fleet: Fleet }>('GET', '/v1/admin/metrics')).fleet;
    const before = await fleet();
    for (const n of [a1, a2, b1]) await admin().request('POST', '/v1/admin/nodes/approve', { body: { node_id: n.node.id, approved: true } });
    const beat = (key: string, jobs: number) =>
      fetch(`${t.url}/v1/nodes/heartbeat`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ capabilities: { ...TEST_CAPABILITIES, cpu: { cores: 4, model: 't', load: 0 }, memory: { total_bytes: 1000, available_bytes: 600 } }, load: { running_jobs: jobs }, agent_version: 'test' }),
      });
    expect((await beat(a1.node_key, 2)).status).toBe(200);
    expect((await beat(a2.node_key, 1)).status).toBe(200);
    expect((await beat(b1.node_key, 0)).status).toBe(200);
    const after = await fleet();
    expect(after.online_by_kind.sandbox! - before.online_by_kind.sandbox!).toBe(2);
    expect(after.online_by_kind.inference! - before.online_by_kind.inference!).toBe(2);
    expect(after.running_jobs - before.running_jobs).toBe(3);
    expect(after.sandbox_capacity.nodes - before.sandbox_capacity.nodes).toBe(2);
    expect(after.sandbox_capacity.cpu_cores - before.sandbox_capacity.cpu_cores).toBe(8);
    // A draining node takes no sandbox work: it leaves the capacity, still online.
    await a.client.request('POST', `/v1/nodes/${a1.node.id}/draining`, { body: { set: true } });
    const drained = await fleet();
    expect(drained.sandbox_capacity.nodes).toBe(after.sandbox_capacity.nodes - 1);
    expect(drained.online_by_kind.sandbox).toBe(after.online_by_kind.sandbox);
    expect((await a.client.request<Array<{ id: string; running_jobs: number; draining: boolean }>>('GET', '/v1/nodes/mine')).find((n) => n.id === a1.node.id)).toMatchObject({ running_jobs: 2, draining: true });
  });
});
