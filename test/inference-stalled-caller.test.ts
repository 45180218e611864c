import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECEIPT_HEADERS } from '@svc/shared';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, untilOnline, type TestAgent } from './support/agent.ts';
import { pausedPost } from './support/http.ts';
import { storedReceipt } from './support/inference-env.ts';
import { flood, startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * A streaming caller that stops taking what it is sent (it vanished without closing, or stopped reading) is
 * disconnected after SVC_INFERENCE_STALL_SECONDS, pays for what was sent, and frees the upstream: a provider's
 * request, or a node's job and its local server's request. Without the limit it holds them until its TCP
 * connection dies, which for a caller that keeps its window shut is never.
 */
const MODEL = 'node-model';
const LOCAL = 'local-name';
const PROVIDED = 'provided-model';
const FUND = 100_000_000;
let t: TestGateway;
let up: ScriptedUpstream;
let agent: TestAgent;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let key: string;

beforeAll(async () => {
  up = await startScriptedUpstream();
  const price = { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 3_000_000 };
  const providers = [{ name: 'direct', base_url: up.url, models: [{ id: PROVIDED, ...price, max_output_tokens: 20_000_000 }] }];
  t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_INFERENCE_STALL_SECONDS: '1', SVC_PROVIDERS: JSON.stringify(providers), SVC_NODE_MODEL_PRICES: JSON.stringify({ [MODEL]: { ...price, max_output_tokens: 20_000_000 } }) } });
  owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, FUND, 'grant', `test-${owner.accountId}`);
  key = (await owner.client.createKey()).key;
  agent = await enrollAgent(t, owner.client, { kinds: ['inference'], models: [MODEL], model_map: { [MODEL]: LOCAL } });
  agent.start({ SVC_INFERENCE_URL: up.url, SVC_DOCKER_SOCKET: '/nonexistent/docker.sock' });
  await untilOnline(t, agent.nodeId);
});

afterAll(async () => {
  await agent?.kill();
  await t?.close();
  await up?.close();
});

describe('a caller that stops reading a stream', () => {
  it.each([
    ['a provider', PROVIDED],
    ['a node', MODEL],
  ])('of %s is disconnected after the stall limit, pays for what was sent, and the upstream is let go', async (_who, model) => {
    up.seen.length = 0;
    const piece = 'z'.repeat(100_000);
    const TOTAL = 400; // 40 MB: far more than the sockets on the way hold
    up.handler = flood(LOCAL, piece, TOTAL);
    const before = await t.gw.services.metering.position(owner.accountId);
    const { res } = await pausedPost(`${t.url}/v1/chat/completions`, key, { model, messages: [{ role: 'user', content: 'flood' }], stream: true });
    // The caller reads nothing more: the gateway lets the upstream go (without the limit, it waits for as long
    // as the caller's connection stays open), and closes the caller's connection.
    await until('upstream request let go', async () => up.seen[0]?.aborted, 20_000);
    let got = '';
    res.setEncoding('utf8');
    res.on('data', (d: string) => (got = (got + d).slice(-200_000)));
    res.on('error', () => undefined);
    res.resume();
    await new Promise((r) => res.socket!.once('close', r));
    expect(got).not.toMatch(/"finish_reason":"stop"|\[DONE\]/); // cut short
    const r = (await until('settled', () => storedReceipt(t, String(res.headers[RECEIPT_HEADERS.id])).catch(() => null), 10_000))!;
    expect(r.detail.outcome).toBe('client_disconnected');
    // Charged for what was sent, which is some of the answer and far from all of it.
    expect(r.units.output_tokens).toBeGreaterThan(0);
    expect(r.units.output_tokens).toBeLessThan((TOTAL * piece.length) / 4 / 2);
    const after = await t.gw.services.metering.position(owner.accountId);
    expect(after).toMatchObject({ balance_micro_usd: before.balance_micro_usd - r.cost_micro_usd, held_micro_usd: 0 });
    if (model === MODEL) await until('node job ended', async () => !(await t.gw.database.db.selectFrom('jobs').select('id').where('node_id', '=', agent.nodeId).where('status', 'in', ['dispatched', 'running']).executeTakeFirst()));
  }, 60_000);
});
