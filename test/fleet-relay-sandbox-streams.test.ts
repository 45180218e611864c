import { describe, expect, it } from 'vitest';
import { RECEIPT_HEADERS } from '@svc/shared';
import { sseFrames } from '@svc/shared/client';
import { until, type TestAgent } from './support/agent.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { RelayPair } from './support/relay-pair.ts';

/**
 * A streamed sandbox run dispatched on one control-plane process (A) to a node whose channel another (B) holds,
 * on one Postgres database: when the caller on A leaves, the cancel goes A -> B -> agent, the node's report of
 * the stopped program comes back the same way, and A charges the seconds it ran, with a receipt. The stop counts
 * neither for nor against the node. Postgres and Docker only.
 */
const enabled = TEST_DB_KIND === 'postgres' && sandboxImage();
const FUND = 10_000_000;

describe.skipIf(!enabled)('a streamed run relayed between processes', () => {
  const pair = new RelayPair();
  let agent: TestAgent;

  it('its caller leaving on A stops it on the node through B; A charges what ran, with a receipt', async () => {
    agent = await pair.agentOn(pair.B(), { kinds: ['sandbox'] }, { SVC_DOCKER_SOCKET: '/var/run/docker.sock', SVC_SANDBOX_IMAGE: SMALL_IMAGE });
    const caller = await pair.a.signIn();
    await pair.a.gw.services.metering.credit(caller.accountId, FUND, 'grant', `relay-streams-${caller.accountId}`);
    const key = (await caller.client.createKey({ scopes: ['sandboxes'] })).key;
    expect((await pair.channelOf(agent.nodeId)).channel_process).toBe(pair.b.gw.database.processId);
    const before = await pair.counts(agent.nodeId);

    const ac = new AbortController();
    const res = await fetch(`${pair.a.url}/v1/sandboxes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'echo start; sleep 120', timeout_seconds: 150, stream: true }),
      signal: ac.signal,
    });
    expect(res.status).toBe(200);
    const id = res.headers.get(RECEIPT_HEADERS.id)!;
    for await (const f of sseFrames(res)) if (f.event === 'stdout' && f.data.includes('start')) break;
    const job = pair.a.gw.fleet.hub.openJobs().find((j) => j.kind === 'sandbox.run')!;
    expect(pair.b.gw.fleet.hub.relayedJobs().map((j) => j.jobId)).toContain(job.jobId);
    ac.abort();

    const db = pair.a.gw.database.db;
    const event = await until('the interrupted run settled on A', () => db.selectFrom('usage_events').selectAll().where('request_id', '=', id).executeTakeFirst(), 60_000);
    const receipt = await caller.client.request<{ payload: { cost_micro_usd: number; detail: Record<string, unknown> } }>('GET', `/v1/receipts/${id}`);
    expect(receipt.payload).toMatchObject({ cost_micro_usd: Number(event.cost_micro_usd), detail: { outcome: 'client_disconnected', exit_code: null } });
    expect(receipt.payload.detail).not.toHaveProperty('duration_source'); // the node's own report, not the gateway's measure
    expect(await pair.a.gw.services.metering.position(caller.accountId)).toMatchObject({ balance_micro_usd: FUND - Number(event.cost_micro_usd), held_micro_usd: 0 });
    expect(await pair.jobRow(job.jobId)).toMatchObject({ status: 'canceled' });
    await until('B let the job go', async () => pair.b.gw.fleet.hub.relayedJobs().length === 0);
    expect(await pair.counts(agent.nodeId)).toEqual(before);
  }, 120_000);
});
