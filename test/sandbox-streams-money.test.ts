import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { RECEIPT_HEADERS } from '@svc/shared';
import { SvcClient, sseFrames } from '@svc/shared/client';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startSandboxAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';

/**
 * The money of streamed sandbox work, end to end (a real control plane with billing enforced, a real svc-node
 * agent, a real Docker engine): a caller that leaves a streamed run or session exec mid-program has it stopped
 * and pays for the seconds it ran, with a usage event and a receipt; a streamed request refused before it runs
 * (no credit, a spend cap, the breaker, bad input, a missing session) is a plain HTTP answer in the error
 * envelope, never a 200 stream.
 */
const enabled = sandboxImage();
if (!enabled) console.warn(`sandbox stream money tests skipped: Docker engine or image ${SMALL_IMAGE} missing (.ci/run builds it: installers/sandbox-image/build.sh --small)`);
const PRICE = 1000; // micro-USD per second
const FUND = 10_000_000;
/** The breaker trips on a request that would take a key past this within its window (a run of 250 s holds more). */
const BREAKER = 200_000;
/** Long enough that a run the gateway did not stop would still be running when every wait below gave up. */
const LONG = { code: 'echo start; sleep 120; echo end', timeout_seconds: 150 };

let t: TestGateway;
let agent: TestAgent;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: String(PRICE), SVC_BREAKER_LIMIT_MICRO_USD: String(BREAKER), SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  agent = await startSandboxAgent(t, (await t.signIn()).client);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
});

/** A new account with `micro` of credit, a sandboxes key (`spendCap` on it, if given) and a session client. */
async function caller(micro: number, spendCap?: number) {
  const s = await t.signIn();
  if (micro > 0) await t.gw.services.metering.credit(s.accountId, micro, 'grant', `test-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['sandboxes'], ...(spendCap !== undefined ? { spend_cap_micro_usd: spendCap } : {}) });
  return { accountId: s.accountId, key: key.key, session: s.client, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}
type Caller = Awaited<ReturnType<typeof caller>>;

const position = (accountId: string) => t.gw.services.metering.position(accountId);

/**
 * Starts a streamed request, reads its SSE until `marker` came in the program's output, then goes away (the
 * connection is closed, as a Ctrl-C or a dropped client does). Returns the request id the stream's headers gave.
 */
async function leaveMidStream(c: Caller, path: string, body: Record<string, unknown>, marker: string): Promise<string> {
  const ac = new AbortController();
  const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }), signal: ac.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const id = res.headers.get(RECEIPT_HEADERS.id);
  expect(id).toBe(res.headers.get('x-request-id'));
  let seen = '';
  for await (const f of sseFrames(res)) {
    if (f.event === 'stdout' || f.event === 'stderr') seen += (JSON.parse(f.data) as { data: string }).data;
    if (seen.includes(marker)) break;
  }
  expect(seen).toContain(marker);
  ac.abort();
  return id!;
}

/**
 * What an interrupted stream must leave: one usage event with its cost, the same cost in a receipt the caller
 * fetches with GET /v1/receipts/{id} (signed by the gateway), no hold, and the balance down by exactly that cost.
 * Waits (bounded) for the settle, which happens after the caller left.
 */
async function expectBilledOnce(c: Caller, requestId: string, route: string) {
  const db = t.gw.database.db;
  const event = await until('the interrupted stream settled', () => db.selectFrom('usage_events').selectAll().where('request_id', '=', requestId).executeTakeFirst(), 60_000);
  const receipt = await c.session.request<{ id: string; payload: Record<string, any>; canonical: string; signature: string }>('GET', `/v1/receipts/${requestId}`);
  expect(verifyMessage(receipt.canonical, receipt.signature)).toBe(t.gw.services.signer.address);
  const cost = Number(event.cost_micro_usd);
  expect(receipt.payload).toMatchObject({ route, kind: 'sandbox', cost_micro_usd: cost, detail: { outcome: 'client_disconnected', exit_code: null } });
  const ran = receipt.payload.detail.duration_ms as number;
  expect(ran).toBeGreaterThan(0);
  expect(cost).toBe(Math.max(1, Math.ceil((ran * PRICE) / 1000)));
  expect(await db.selectFrom('usage_events').select('id').where('account_id', '=', c.accountId).execute()).toHaveLength(1);
  expect(await position(c.accountId)).toMatchObject({ balance_micro_usd: FUND - cost, held_micro_usd: 0 });
  return { cost, ran };
}

/** A refusal before any stream: the status, JSON in the error envelope, no SSE frame, nothing charged or held. */
async function expectPlainRefusal(c: Caller, path: string, body: Record<string, unknown>, status: number, type: string, balance: number) {
  const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
  const text = await res.text();
  expect({ status: res.status, type: res.headers.get('content-type') }, text).toEqual({ status, type: expect.stringMatching(/^application\/json/) });
  expect(text).not.toMatch(/^(event|data):/m);
  const envelope = JSON.parse(text) as { error: Record<string, unknown> };
  expect(envelope.error).toMatchObject({ type, message: expect.any(String) });
  expect(await position(c.accountId)).toMatchObject({ balance_micro_usd: balance, held_micro_usd: 0 });
  return envelope.error;
}

describe.skipIf(!enabled)('a caller that leaves a streamed run', () => {
  it('POST /v1/sandboxes: the run is stopped and billed for the seconds it ran, with a receipt', async () => {
    const c = await caller(FUND);
    const id = await leaveMidStream(c, '/v1/sandboxes', { language: 'sh', ...LONG }, 'start');
    await expectBilledOnce(c, id, 'POST /v1/sandboxes');
    // Stopped, not left to run its 120 s: its job ended as canceled, its run record says so with the same cost.
    const job = await t.gw.database.db.selectFrom('jobs').select(['status', 'ended_at']).where('account_id', '=', c.accountId).where('kind', '=', 'sandbox.run').executeTakeFirstOrThrow();
    expect(job).toMatchObject({ status: 'canceled', ended_at: expect.any(Date) });
    const history = await c.session.request<Array<{ id: string; status: string; cost_micro_usd: number; receipt_id: string }>>('GET', '/v1/usage/sandboxes');
    expect(history).toEqual([expect.objectContaining({ id, status: 'canceled', receipt_id: id })]);
  });

  it('POST /v1/sandboxes/sessions/{id}/exec: the exec is stopped and billed, the session carries on and counts it', async () => {
    const c = await caller(FUND);
    const s = await c.api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    const id = await leaveMidStream(c, `/v1/sandboxes/sessions/${s.id}/exec`, { language: 'sh', ...LONG }, 'start');
    const { cost } = await expectBilledOnce(c, id, 'POST /v1/sandboxes/sessions/:id/exec');
    const view = await c.api.request<{ status: string; exec_count: number; cost_micro_usd: number }>('GET', `/v1/sandboxes/sessions/${s.id}`);
    expect(view).toMatchObject({ status: 'running', exec_count: 1, cost_micro_usd: cost });
    // Only the exec's processes were killed: the workspace's container still runs the next one.
    const next = await c.api.request<{ status: string; stdout: string }>('POST', `/v1/sandboxes/sessions/${s.id}/exec`, { body: { language: 'sh', code: 'echo alive' } });
    expect(next).toMatchObject({ status: 'succeeded', stdout: 'alive\n' });
    await c.api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  });

  it('a caller that stays still gets the result and the receipt as the last events, on a run and on a session exec', async () => {
    const c = await caller(FUND);
    const s = await c.api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    let spent = 0;
    for (const path of ['/v1/sandboxes', `/v1/sandboxes/sessions/${s.id}/exec`]) {
      const res = await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${c.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ code: 'echo hi', stream: true }) });
      const events: Array<{ event: string; data: any }> = [];
      for await (const f of sseFrames(res)) if (f.event) events.push({ event: f.event, data: JSON.parse(f.data) });
      expect(events.map((e) => e.event)).toEqual(['stdout', 'result', 'receipt']);
      expect(events[1]!.data).toMatchObject({ status: 'succeeded', exit_code: 0 });
      expect(events[2]!.data.id).toBe(res.headers.get(RECEIPT_HEADERS.id));
      spent += events[1]!.data.cost_micro_usd as number;
    }
    expect(await position(c.accountId)).toMatchObject({ balance_micro_usd: FUND - spent, held_micro_usd: 0 });
    await c.api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  });
});

describe.skipIf(!enabled)('a streamed request refused before it runs is a plain answer, never a 200 stream', () => {
  it('402 insufficient_credit with its payment terms, on a run and on a session exec', async () => {
    const c = await caller(0);
    const e = await expectPlainRefusal(c, '/v1/sandboxes', { code: 'echo hi' }, 402, 'insufficient_credit', 0);
    expect(e).toMatchObject({ x402Version: 1, accepts: [expect.objectContaining({ scheme: 'exact', resource: `${t.url}/v1/sandboxes` })] });
    const s = await c.api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    await expectPlainRefusal(c, `/v1/sandboxes/sessions/${s.id}/exec`, { code: 'echo hi' }, 402, 'insufficient_credit', 0);
    await c.api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  });

  it('402 spend_cap_reached and 402 circuit_breaker_tripped', async () => {
    const capped = await caller(FUND, 1000);
    await expectPlainRefusal(capped, '/v1/sandboxes', { code: 'echo hi' }, 402, 'spend_cap_reached', FUND);
    const s = await capped.api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    await expectPlainRefusal(capped, `/v1/sandboxes/sessions/${s.id}/exec`, { code: 'echo hi' }, 402, 'spend_cap_reached', FUND);
    await capped.api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
    // A hold for 250 s of run would take the key past the breaker's limit: the key is frozen.
    const fast = await caller(FUND);
    await expectPlainRefusal(fast, '/v1/sandboxes', { code: 'echo hi', timeout_seconds: 250 }, 402, 'circuit_breaker_tripped', FUND);
    await expectPlainRefusal(fast, '/v1/sandboxes', { code: 'echo hi' }, 402, 'circuit_breaker_tripped', FUND);
  });

  it('503 no_capacity where no sandbox node can take the run, with its Retry-After', async () => {
    const lone = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: String(PRICE) } });
    try {
      const s = await lone.signIn();
      const key = (await s.client.createKey({ scopes: ['sandboxes'] })).key;
      const res = await fetch(`${lone.url}/v1/sandboxes`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ code: 'echo hi', stream: true }) });
      const text = await res.text();
      expect({ status: res.status, type: res.headers.get('content-type'), retry: res.headers.get('retry-after') }, text).toEqual({ status: 503, type: expect.stringMatching(/^application\/json/), retry: '5' });
      expect((JSON.parse(text) as { error: { type: string } }).error.type).toBe('no_capacity');
      expect(await lone.gw.services.metering.position(s.accountId)).toMatchObject({ held_micro_usd: 0 });
    } finally {
      await lone.close();
    }
  });

  it('400 for bad input and 404 for a session that is not the caller’s', async () => {
    const c = await caller(FUND);
    const e = await expectPlainRefusal(c, '/v1/sandboxes', { code: 'true', timeout_seconds: 100_000 }, 400, 'invalid_request', FUND);
    expect(e.param).toBe('timeout_seconds');
    await expectPlainRefusal(c, '/v1/sandboxes/sessions/sbx_nosuchsession/exec', { code: 'true' }, 404, 'not_found', FUND);
  });
});
