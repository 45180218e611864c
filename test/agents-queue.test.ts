import { afterAll, describe, expect, it } from 'vitest';
import type { Gateway } from '../control-plane/src/gateway.ts';
import { agentById } from '../control-plane/src/modules/agents/store.ts';
import { startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';

/**
 * The queue of hook and mailbox runs is rows, not memory: a queued run is claimed once however many processes
 * drain at once (for update skip locked; Postgres, two processes), a run queued by a process that stopped is
 * run by the next one on the same data, and a run whose process died mid-run ends as interrupted, never twice.
 */
const enabled = sandboxImage();
const ENV = { SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' };

const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

/** Queues runs the way a hook does, without starting them here (no kick): the workers under test pick them up. */
async function queue(gw: Gateway, agentId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const run = await gw.database.db.transaction().execute(async (trx) => gw.agents.runner.queue(trx, (await agentById(trx, agentId, true))!, 'hook', `input ${i}`));
    ids.push(run.id);
  }
  return ids;
}

async function startNode(t: TestGateway, owner: Awaited<ReturnType<TestGateway['signIn']>>): Promise<TestAgent> {
  const node = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  node.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  cleanups.push(() => node.kill('SIGTERM'));
  await until('sandbox agent connected', async () => t.gw.fleet.hub.isConnected(node.nodeId) && (await t.gw.fleet.registry.get(node.nodeId)).last_heartbeat_at !== null, 60_000);
  return node;
}

const deploy = (owner: Awaited<ReturnType<TestGateway['signIn']>>) =>
  owner.client.request<{ id: string }>('POST', '/v1/agents', { body: { name: 'q', language: 'sh', code: '[ -n "$SVC_INPUT" ]', max_runs_per_hour: 100 } });

describe.skipIf(!enabled)('queued agent runs', () => {
  it('a run queued by a process that stopped runs on the next one; a run cut off mid-way ends interrupted', async () => {
    const first = await startTestGateway({ env: ENV, persistent: true });
    const owner = await first.signIn();
    const node = await startNode(first, owner);
    const a = await deploy(owner);
    const [queued] = await queue(first.gw, a.id, 1);
    const [cut] = await queue(first.gw, a.id, 1);
    // The second was claimed by a process that died mid-run: running, its claim long past by the time the next one looks.
    await first.gw.database.db.updateTable('agent_runs').set({ status: 'running', claimed_by: 'svc_p_gone', claim_until: first.clock.now(), input_sealed: null }).where('id', '=', cut!).execute();
    const port = Number(new URL(first.url).port);
    await first.stop();

    const second = await startTestGateway({ env: ENV, share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, port, clock: first.clock });
    cleanups.push(() => second.close().then(() => first.close()));
    await until('agent back on the restarted process', async () => second.gw.fleet.hub.isConnected(node.nodeId), 60_000);
    second.clock.advance(1000);
    await second.gw.leader.runAllOnce();
    const runs = await second.gw.database.db.selectFrom('agent_runs').select(['id', 'status', 'error_type', 'receipt_id']).where('agent_id', '=', a.id).orderBy('seq').execute();
    expect(runs).toEqual([
      { id: queued, status: 'succeeded', error_type: null, receipt_id: expect.stringMatching(/^req_/) },
      { id: cut, status: 'failed', error_type: 'interrupted', receipt_id: null },
    ]);
  }, 180_000);

  it.skipIf(TEST_DB_KIND !== 'postgres')('each queued run is claimed once when two processes drain at once', async () => {
    const pair = await startGatewayPair({ env: ENV });
    cleanups.push(() => pair.close());
    const owner = await pair.a.signIn();
    await startNode(pair.b, owner);
    const a = await deploy(owner);
    const ids = await queue(pair.a.gw, a.id, 6);
    await Promise.all([pair.a.gw.agents.runner.drain(), pair.b.gw.agents.runner.drain(), pair.a.gw.agents.runner.drain()]);
    const db = pair.a.gw.database.db;
    const runs = await db.selectFrom('agent_runs').select(['id', 'status', 'request_id', 'claimed_by']).where('id', 'in', ids).execute();
    expect(runs.map((r) => r.status)).toEqual(Array(6).fill('succeeded'));
    const requestIds = runs.map((r) => r.request_id);
    expect(await db.selectFrom('sandbox_runs').select('id').where('id', 'in', requestIds).execute()).toHaveLength(6);
    expect(await db.selectFrom('usage_events').select('id').where('request_id', 'in', requestIds).execute()).toHaveLength(6);
  }, 180_000);
});
