import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECEIPT_HEADERS } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * Hosted agents' runs end to end: a real control plane, a real svc-node agent and Docker (the small busybox
 * image). Each run is a sandbox run under the agent's key: triggered now, by its schedule (injected clock and
 * the leader's loop), by a mailbox message; receipted (verified with POST /v1/receipts/verify) and listed; the
 * key's cap and max_runs_per_hour hold.
 */
const enabled = sandboxImage();
const PRICE = 1000; // micro-USD per second

let t: TestGateway;
let node: TestAgent;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let api: SvcClient;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: String(PRICE), SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'agent-tests');
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await owner.client.createKey({ scopes: ['agents'] })).key } });
  node = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  node.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  await until('sandbox agent connected', async () => t.gw.fleet.hub.isConnected(node.nodeId) && (await t.gw.fleet.registry.get(node.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await node?.kill('SIGTERM');
  await t?.close();
});

type Agent = { id: string; next_run_at: string | null; run_count: number; last_run: { id: string; status: string } | null; key: { id: string; spend_cap_micro_usd: number | null; spent_micro_usd: number } };
type Run = {
  id: string;
  trigger: string;
  status: string;
  cost_micro_usd: number | null;
  exit_code: number | null;
  error: { type: string } | null;
  request_id: string;
  receipt: { id: string; canonical: string; signature: string; payload: Record<string, unknown> } | null;
};
const deploy = (body: Record<string, unknown>) => owner.client.request<Agent>('POST', '/v1/agents', { body: { name: 'a', language: 'sh', code: 'true', ...body } });
const runs = async (id: string) => (await owner.client.request<{ runs: Run[]; agent_id: string }>('GET', `/v1/agents/${id}/runs`)).runs;
/** Moves the test clock; the node heartbeats every 60 s of real time, so its last heartbeat moves with the clock. */
async function advance(ms: number) {
  t.clock.advance(ms);
  await t.gw.database.db.updateTable('nodes').set({ last_heartbeat_at: t.clock.now() }).where('id', '=', node.nodeId).execute();
}
const verify = async (r: Run) => t.client.request<{ valid: boolean; payload: Record<string, unknown> }>('POST', '/v1/receipts/verify', { body: { receipt: r.receipt!.canonical, signature: r.receipt!.signature } });

describe.skipIf(!enabled)('agent runs', () => {
  it('runs now: the program sees its input, ids, key and gateway URL; the sandbox result comes back once; the run is receipted and listed', async () => {
    const code = 'echo "in=$SVC_INPUT agent=$SVC_AGENT_ID run=$SVC_RUN_ID trigger=$SVC_TRIGGER url=$SVC_GATEWAY_URL"; case "$SVC_API_KEY" in sk-svc_*) echo key-ok;; esac; echo err >&2; exit 3';
    const a = await deploy({ code });
    const res = await owner.client.raw('POST', `/v1/agents/${a.id}/trigger`, { body: { input: 'hello agent' } });
    expect(res.status).toBe(200);
    const out = (await res.json()) as { run_id: string; agent_id: string; stdout: string; stderr: string; exit_code: number; status: string; receipt: { id: string } };
    expect(out).toMatchObject({ agent_id: a.id, exit_code: 3, status: 'failed', stderr: 'err\n' });
    expect(out.stdout).toBe(`in=hello agent agent=${a.id} run=${out.run_id} trigger=manual url=${t.url}\nkey-ok\n`);
    expect(res.headers.get(RECEIPT_HEADERS.id)).toBe(out.receipt.id);
    const [run] = await runs(a.id);
    expect(run).toMatchObject({ id: out.run_id, trigger: 'manual', status: 'failed', exit_code: 3, error: null });
    expect(run!.cost_micro_usd).toBeGreaterThan(0);
    expect(JSON.stringify(run)).not.toMatch(/hello agent|key-ok/); // metadata only
    const v = await verify(run!);
    expect(v.valid).toBe(true);
    expect(v.payload).toMatchObject({ id: run!.request_id, cost_micro_usd: run!.cost_micro_usd, detail: { agent_id: a.id, agent_run_id: run!.id, trigger: 'manual', exit_code: 3 } });
    // Metered as a sandbox run under the agent's key.
    const rec = await t.gw.database.db.selectFrom('sandbox_runs').select(['key_id', 'receipt_id']).where('id', '=', run!.request_id).executeTakeFirstOrThrow();
    expect(rec).toEqual({ key_id: a.key.id, receipt_id: run!.receipt!.id });
    expect(await owner.client.request<Run>('GET', `/v1/agents/${a.id}/runs/${run!.id}`)).toEqual(run);
    const listed = (await owner.client.request<{ agents: Agent[] }>('GET', '/v1/agents')).agents.find((x) => x.id === a.id)!;
    expect(listed).toMatchObject({ run_count: 1, last_run: { id: run!.id, status: 'failed' } });
    expect(listed.key.spent_micro_usd).toBe(run!.cost_micro_usd);
  });

  it('runs on its schedule from the leader\'s loop, once for a run missed while no leader ran', async () => {
    const a = await deploy({ schedule: '*/5 * * * *', code: '[ "$SVC_TRIGGER" = schedule ]' });
    await t.gw.leader.runAllOnce();
    expect(await runs(a.id)).toEqual([]); // not due yet
    await advance(new Date(a.next_run_at!).getTime() + 1000 - t.clock.now().getTime());
    await t.gw.leader.runAllOnce();
    const first = await runs(a.id);
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ trigger: 'schedule', status: 'succeeded', exit_code: 0 });
    expect((await verify(first[0]!)).valid).toBe(true);
    // An hour without a leader: twelve ticks missed, one run.
    await advance(3600_000);
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    const after = await runs(a.id);
    expect(after).toHaveLength(2);
    expect(after[0]).toMatchObject({ trigger: 'schedule', status: 'succeeded' });
    const listed = (await owner.client.request<{ agents: Agent[] }>('GET', '/v1/agents')).agents.find((x) => x.id === a.id)!;
    expect(new Date(listed.next_run_at!).getTime()).toBeGreaterThan(t.clock.now().getTime());
  });

  it('runs on a mailbox message, with the message as SVC_INPUT, started by the leader\'s loop', async () => {
    const a = await deploy({ mailbox: true, code: '[ "$SVC_INPUT" = "ping" ] && [ "$SVC_TRIGGER" = mailbox ] || exit 7' });
    const sent = await api.request<{ run_id: string }>('POST', `/v1/agents/${a.id}/messages`, { body: { content: 'ping' } });
    expect(sent.run_id).toMatch(/^arun_/);
    const other = await api.request<{ run_id: string }>('POST', `/v1/agents/${a.id}/messages`, { body: { content: 'pong' } });
    expect((await runs(a.id)).map((r) => r.status)).toEqual(['queued', 'queued']);
    await t.gw.leader.runAllOnce();
    const done = await runs(a.id);
    expect(done.find((r) => r.id === sent.run_id)).toMatchObject({ trigger: 'mailbox', status: 'succeeded', exit_code: 0 });
    expect(done.find((r) => r.id === other.run_id)).toMatchObject({ trigger: 'mailbox', status: 'failed', exit_code: 7 });
    for (const r of done) expect((await verify(r)).valid).toBe(true);
    // The messages stay in the mailbox; the sealed input left the run rows when they were claimed.
    expect((await api.request<{ unread: number }>('GET', `/v1/agents/${a.id}/messages`)).unread).toBe(2);
    const rows = await t.gw.database.db.selectFrom('agent_runs').select('input_sealed').where('agent_id', '=', a.id).execute();
    expect(rows.every((r) => r.input_sealed === null)).toBe(true);
    // A disabled agent takes the message but starts no run.
    await owner.client.request('POST', `/v1/agents/${a.id}/gate`, { body: { enabled: false } });
    const skipped = await api.request<{ run_id: string | null; run_skipped: { type: string } }>('POST', `/v1/agents/${a.id}/messages`, { body: { content: 'ping' } });
    expect(skipped).toMatchObject({ run_id: null, run_skipped: { type: 'agent_disabled' } });
  });

  it('never lets its key spend past its cap: a run beyond it is refused and recorded so', async () => {
    // Each run holds its whole time limit (2 s + 5 s at 1000/s = 7000); the sleep costs at least 1000.
    const a = await deploy({ code: 'sleep 1', timeout_seconds: 2, spend_cap_micro_usd: 7_500 });
    const first = await owner.client.request<{ status: string; cost_micro_usd: number }>('POST', `/v1/agents/${a.id}/trigger`, { body: {} });
    expect(first.status).toBe('succeeded');
    expect(first.cost_micro_usd).toBeGreaterThanOrEqual(1000);
    await expectApiError(owner.client.request('POST', `/v1/agents/${a.id}/trigger`, { body: {} }), 402, 'spend_cap_reached');
    const [refused] = await runs(a.id);
    expect(refused).toMatchObject({ trigger: 'manual', status: 'refused', error: { type: 'spend_cap_reached' }, receipt: null, cost_micro_usd: null });
    const listed = (await owner.client.request<{ agents: Agent[] }>('GET', '/v1/agents')).agents.find((x) => x.id === a.id)!;
    expect(listed.key.spent_micro_usd).toBe(first.cost_micro_usd);
    expect(listed.key.spent_micro_usd).toBeLessThanOrEqual(7_500);
  });

  it('answers 429 with Retry-After past max_runs_per_hour, and runs again an hour later', async () => {
    const a = await deploy({ max_runs_per_hour: 2 });
    await owner.client.request('POST', `/v1/agents/${a.id}/trigger`, { body: {} });
    await advance(60_000);
    await owner.client.request('POST', `/v1/agents/${a.id}/trigger`, { body: {} });
    const res = await owner.client.raw('POST', `/v1/agents/${a.id}/trigger`, { body: {} });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBe(3540);
    expect(((await res.json()) as { error: { reason: string } }).error.reason).toBe('max_runs_per_hour');
    expect(await runs(a.id)).toHaveLength(2);
    await advance(3541_000);
    expect((await owner.client.request<{ status: string }>('POST', `/v1/agents/${a.id}/trigger`, { body: {} })).status).toBe('succeeded');
  });
});
