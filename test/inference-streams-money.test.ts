import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { RECEIPT_HEADERS } from '@svc/shared';
import { sseFrames } from '@svc/shared/client';
import { fundedKey, type TestGateway } from './support/gateway.ts';
import type { TestUpstream } from './support/upstream.ts';
import { FUND, closeInferenceEnv, startInferenceEnv, user } from './support/inference-env.ts';
import { until } from './support/agent.ts';

/**
 * The money of every streamed inference route (chat completions, Anthropic Messages, Responses), end to end
 * against a real OpenAI-compatible upstream on loopback with billing enforced: a caller that leaves mid-stream
 * pays exactly for what was delivered, with a usage event and a receipt it can fetch; a stream refused for money
 * or bad input is the plain HTTP answer in the route's error shape before any SSE frame.
 */
/** The breaker trips on a request that would take a key past this within its window (a hold for 1,000 output tokens does). */
const BREAKER = 3_000;

let up: TestUpstream;
let t: TestGateway;
beforeAll(async () => {
  ({ up, t } = await startInferenceEnv({ SVC_BREAKER_LIMIT_MICRO_USD: String(BREAKER) }));
});
afterAll(() => closeInferenceEnv({ up, t }));
beforeEach(() => up.reset());

interface Route {
  path: string;
  body(content: string, maxTokens: number): Record<string, unknown>;
  /** The text a frame delivers, if any. */
  delta(event: string | null, data: string): string;
  /** The error envelope of a refusal, from the route's error shape. */
  error(body: Record<string, any>): Record<string, unknown>;
}

const ROUTES: Record<string, Route> = {
  'chat completions': {
    path: '/v1/chat/completions',
    body: (content, maxTokens) => ({ model: 'test-chat', messages: user(content), max_tokens: maxTokens }),
    delta: (_e, d) => (d.startsWith('{') ? ((JSON.parse(d) as { choices?: Array<{ delta?: { content?: string } }> }).choices?.[0]?.delta?.content ?? '') : ''),
    error: (b) => b.error,
  },
  'Anthropic Messages': {
    path: '/v1/messages',
    body: (content, maxTokens) => ({ model: 'test-chat', messages: user(content), max_tokens: maxTokens }),
    delta: (e, d) => (e === 'content_block_delta' ? ((JSON.parse(d) as { delta: { text?: string } }).delta.text ?? '') : ''),
    error: (b) => {
      expect(b.type).toBe('error'); // Anthropic's error shape
      return b.error;
    },
  },
  Responses: {
    path: '/v1/responses',
    body: (content, maxTokens) => ({ model: 'test-chat', input: content, max_output_tokens: maxTokens }),
    delta: (e, d) => (e === 'response.output_text.delta' ? (JSON.parse(d) as { delta: string }).delta : ''),
    error: (b) => b.error,
  },
};

const post = (path: string, key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
  fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }), signal });

describe.each(Object.entries(ROUTES))('%s, streamed', (_name, route) => {
  it('a caller that leaves mid-stream pays exactly for what was delivered: a usage event, a receipt it fetches, no hold left', async () => {
    const a = await fundedKey(t, FUND);
    up.switches.reply = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    up.switches.chunkDelayMs = 40;
    const ac = new AbortController();
    const res = await post(route.path, a.key, route.body('Tell me a long story', 200), ac.signal);
    expect(res.status).toBe(200);
    const id = res.headers.get(RECEIPT_HEADERS.id)!;
    let deltas = 0;
    for await (const f of sseFrames(res)) if (route.delta(f.event, f.data) && ++deltas === 5) break;
    ac.abort();
    const db = t.gw.database.db;
    const event = await until('the interrupted stream settled', () => db.selectFrom('usage_events').selectAll().where('request_id', '=', id).executeTakeFirst(), 30_000);
    const receipt = await a.client.request<{ payload: Record<string, any>; canonical: string; signature: string }>('GET', `/v1/receipts/${id}`);
    expect(verifyMessage(receipt.canonical, receipt.signature)).toBe(t.gw.services.signer.address);
    const cost = Number(event.cost_micro_usd);
    expect(receipt.payload).toMatchObject({ route: `POST ${route.path}`, kind: 'inference', cost_micro_usd: cost, detail: { outcome: 'client_disconnected', stream: true } });
    expect(cost).toBe(receipt.payload.units.input_tokens * 2 + receipt.payload.units.output_tokens * 5);
    expect(receipt.payload.units.output_tokens).toBeGreaterThan(0);
    expect(await db.selectFrom('usage_events').select('id').where('account_id', '=', a.accountId).execute()).toHaveLength(1);
    expect(await t.gw.services.metering.position(a.accountId)).toMatchObject({ balance_micro_usd: FUND - cost, held_micro_usd: 0 });
  });

  it('refused before any frame with the plain status and envelope: 402 insufficient_credit, spend_cap_reached, circuit_breaker_tripped; 404, 400, a 429 from the upstream', async () => {
    const refused = async (key: string, body: Record<string, unknown>, status: number, type: string) => {
      const res = await post(route.path, key, body);
      const text = await res.text();
      expect({ status: res.status, type: res.headers.get('content-type') }, text).toEqual({ status, type: expect.stringMatching(/^application\/json/) });
      expect(text).not.toMatch(/^(event|data):/m);
      const e = route.error(JSON.parse(text) as Record<string, any>);
      expect(e).toMatchObject({ type, message: expect.any(String) });
      return e;
    };
    const calls = up.requests.length;
    const poor = await fundedKey(t, 100);
    expect(await refused(poor.key, route.body('hi', 200), 402, 'insufficient_credit')).toMatchObject({ accepts: [expect.objectContaining({ scheme: 'exact' })] });
    const rich = await fundedKey(t, FUND);
    const capped = (await rich.client.createKey({ spend_cap_micro_usd: 10 })).key;
    await refused(capped, route.body('hi', 200), 402, 'spend_cap_reached');
    const fast = (await rich.client.createKey()).key;
    await refused(fast, route.body('hi', 1000), 402, 'circuit_breaker_tripped'); // its hold alone passes the breaker's limit
    await refused(fast, route.body('hi', 10), 402, 'circuit_breaker_tripped'); // frozen from then on
    await refused(rich.key, { ...route.body('hi', 10), model: 'no-such-model' }, 404, 'not_found');
    await refused(rich.key, route.body('hi', 5000), 400, 'invalid_request'); // above the model's output limit
    expect(up.requests.length).toBe(calls);
    // The upstream refusing before it answered anything (rate limiting) is a plain answer too, at no charge.
    up.switches.failWith = 429;
    await refused(rich.key, route.body('hi', 10), 429, 'rate_limited');
    for (const acct of [poor, rich]) expect(await t.gw.services.metering.position(acct.accountId)).toMatchObject({ balance_micro_usd: acct === poor ? 100 : FUND, held_micro_usd: 0 });
  });
});
