import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';

/**
 * Inbound hooks end to end (a real node agent and Docker): a signed call queues a run with the raw body as
 * SVC_INPUT (202) that runs and is receipted; wrong token, missing or bad signature, stale timestamp and replay
 * are refused and write nothing; max_runs_per_hour and the key's cap hold under bursts; the hook token never
 * reaches the request log.
 */
const enabled = sandboxImage();
const PRICE = 1000;
const SECRET = 'hook-secret-0123456789';

const logLines: string[] = [];
let t: TestGateway;
let node: TestAgent;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway({
    env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: String(PRICE), SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' },
    logger: { level: 'info', stream: { write: (line: string) => void logLines.push(line) } },
  });
  owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'agent-hook-tests');
  node = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  node.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
  await until('sandbox agent connected', async () => t.gw.fleet.hub.isConnected(node.nodeId) && (await t.gw.fleet.registry.get(node.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await node?.kill('SIGTERM');
  await t?.close();
});

type Run = { id: string; trigger: string; status: string; exit_code: number | null; error: { type: string } | null; receipt: { canonical: string; signature: string } | null };
const deploy = (body: Record<string, unknown>) => owner.client.request<{ id: string }>('POST', '/v1/agents', { body: { name: 'h', language: 'sh', code: 'true', ...body } });
const runs = async (id: string) => (await owner.client.request<{ runs: Run[] }>('GET', `/v1/agents/${id}/runs`)).runs;
const settled = (id: string) => until(`runs of ${id} ended`, async () => {
  const r = await runs(id);
  return r.every((x) => x.status !== 'queued' && x.status !== 'running') && r;
});
const hookUrl = async (id: string) => (await owner.client.request<{ url: string }>('POST', `/v1/agents/${id}/hooks/rotate`)).url;
const sign = (ts: string, body: string, secret = SECRET) => `sha256=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;
const now = () => String(Math.floor(t.clock.now().getTime() / 1000));
const post = (url: string, body: string, headers: Record<string, string> = {}) => fetch(url, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

describe.skipIf(!enabled)('agent hooks', () => {
  it('a signed call queues a run with the raw body as SVC_INPUT; refused calls write nothing; the token stays out of the log', async () => {
    const body = '{"event": "push", "n": 1}';
    const a = await deploy({ code: `[ "$SVC_INPUT" = '${body}' ] && [ "$SVC_TRIGGER" = hook ] || exit 9` });
    const url = await hookUrl(a.id);
    const token = url.split('/').at(-1)!;
    await owner.client.request('POST', `/v1/agents/${a.id}/hooks/secret`, { body: { secret: SECRET } });
    const ts = now();
    const res = await post(url, body, { 'x-svc-timestamp': ts, 'x-svc-signature': sign(ts, body) });
    expect(res.status).toBe(202);
    const accepted = (await res.json()) as { run_id: string; status: string };
    expect(accepted.status).toBe('queued');
    const [run] = await settled(a.id);
    expect(run).toMatchObject({ id: accepted.run_id, trigger: 'hook', status: 'succeeded', exit_code: 0 });
    const v = await t.client.request<{ valid: boolean }>('POST', '/v1/receipts/verify', { body: { receipt: run!.receipt!.canonical, signature: run!.receipt!.signature } });
    expect(v.valid).toBe(true);

    const refusals: Array<[string, Response, number]> = [
      ['replay', await post(url, body, { 'x-svc-timestamp': ts, 'x-svc-signature': sign(ts, body) }), 409],
      ['wrong token', await post(url.replace(token, `${token.slice(0, -2)}xx`), body, { 'x-svc-timestamp': ts, 'x-svc-signature': sign(ts, body) }), 404],
      ['unknown agent', await post(url.replace(a.id, 'agt_unknown'), body), 404],
      ['no signature', await post(url, body), 401],
      ['bad signature', await post(url, body, { 'x-svc-timestamp': now(), 'x-svc-signature': sign(now(), body, 'another-secret-0123') }), 401],
      ['other body', await post(url, '{"event":"tampered"}', { 'x-svc-timestamp': ts, 'x-svc-signature': sign(ts, body) }), 401],
      ['stale timestamp', await post(url, body, { 'x-svc-timestamp': String(Number(ts) - 301), 'x-svc-signature': sign(String(Number(ts) - 301), body) }), 401],
    ];
    for (const [what, r, status] of refusals) expect(r.status, what).toBe(status);
    expect(await runs(a.id)).toHaveLength(1);
    // Without the secret, the token alone is enough; a disabled agent refuses (409) and writes nothing.
    await owner.client.request('POST', `/v1/agents/${a.id}/hooks/secret`, { body: { secret: null } });
    expect((await post(url, body)).status).toBe(202);
    await owner.client.request('POST', `/v1/agents/${a.id}/gate`, { body: { enabled: false } });
    expect((await post(url, body)).status).toBe(409);
    await settled(a.id);
    expect(await runs(a.id)).toHaveLength(2);

    const log = logLines.join('');
    expect(log).toContain(`/v1/agents/${a.id}/hooks/[redacted]`);
    expect(log).not.toContain(token);
    expect(log).not.toContain(token.slice(4, 20));
  });

  it('holds max_runs_per_hour under a burst: the excess gets 429 with Retry-After', async () => {
    const a = await deploy({ max_runs_per_hour: 3 });
    const url = await hookUrl(a.id);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => post(url, `{"i":${i}}`)));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([202, 202, 202, 429, 429, 429, 429, 429]);
    for (const r of answers.filter((x) => x.status === 429)) {
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(3599);
      expect(((await r.json()) as { error: { reason: string } }).error.reason).toBe('max_runs_per_hour');
    }
    expect((await settled(a.id)).map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it("holds the agent key's cap under a burst: runs beyond it are refused, the key never spends past it", async () => {
    // A run holds up to 7000 (2 s + 5 s at 1000/s); the cap covers two at once.
    const cap = 15_000;
    const a = await deploy({ code: 'sleep 1', timeout_seconds: 2, spend_cap_micro_usd: cap, max_runs_per_hour: 100 });
    const url = await hookUrl(a.id);
    const answers = await Promise.all(Array.from({ length: 6 }, () => post(url, '{}')));
    const accepted = answers.filter((r) => r.status === 202).length;
    expect(accepted).toBeGreaterThanOrEqual(1);
    for (const r of answers.filter((x) => x.status !== 202)) {
      expect(r.status).toBe(402);
      expect(((await r.json()) as { error: { type: string } }).error.type).toBe('spend_cap_reached');
    }
    const done = await settled(a.id);
    expect(done).toHaveLength(accepted);
    for (const r of done) expect(['succeeded', 'refused']).toContain(r.status);
    const agent = (await owner.client.request<{ agents: Array<{ id: string; key: { spent_micro_usd: number } }> }>('GET', '/v1/agents')).agents.find((x) => x.id === a.id)!;
    expect(agent.key.spent_micro_usd).toBeGreaterThan(0);
    expect(agent.key.spent_micro_usd).toBeLessThanOrEqual(cap);
  });
});
