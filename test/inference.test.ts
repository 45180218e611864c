import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { verifyMessage } from 'ethers';
import { RECEIPT_HEADERS, SseParser, estimateTokens } from '@svc/shared';
import { estimateChatInput } from '../control-plane/src/modules/inference/tokens.ts';
import { loadConfig } from '../control-plane/src/config.ts';
import { fundedKey, type TestGateway } from './support/gateway.ts';
import { words, type TestUpstream } from './support/upstream.ts';
import { FUND, IN, OUT, closeInferenceEnv, startInferenceEnv, storedReceipt, user } from './support/inference-env.ts';
import { until } from './support/agent.ts';

/**
 * Inference through a configured provider: the official `openai` and `@anthropic-ai/sdk` clients against
 * the gateway, whose upstream is a real OpenAI-compatible HTTP server on loopback (see inference-env.ts).
 * Anthropic Messages and OpenAI Responses over chat are in inference-translation.test.ts.
 */
let up: TestUpstream;
let t: TestGateway;
let acct: { accountId: string; key: string };
let oa: OpenAI;
let an: Anthropic;

beforeAll(async () => {
  ({ up, t, acct, oa, an } = await startInferenceEnv());
});
afterAll(() => closeInferenceEnv({ up, t }));
beforeEach(() => up.reset());

const funded = (micro: number) => fundedKey(t, micro);
const position = (id: string) => t.gw.services.metering.position(id);
/** Answers come before their settle commits (write-behind); reads of the database wait for those commits. */
const committed = () => t.gw.services.metering.settledAll();
const receipt = (id: string) => storedReceipt(t, id);
const usageEvents = async (accountId: string) => (await committed(), await t.gw.database.db.selectFrom('usage_events').select('id').where('account_id', '=', accountId).execute()).length;
const REPLY = () => up.switches.reply;

describe('configuration', () => {
  it('SVC_PROVIDERS and SVC_NODE_MODEL_PRICES are checked at boot with the failing path named', () => {
    const base = { SVC_DATA_DIR: '/tmp/x' };
    const providers = (v: unknown) => () => loadConfig({ ...base, SVC_PROVIDERS: JSON.stringify(v) });
    expect(providers([{ name: 'a', base_url: 'ftp://x/v1', models: [{ id: 'm', input_micro_usd_per_mtok: 1 }] }])).toThrow(/SVC_PROVIDERS: \[0\]\.base_url/);
    const m = { id: 'm', input_micro_usd_per_mtok: 1, output_micro_usd_per_mtok: 2 };
    expect(providers([{ name: 'a', base_url: 'http://x/v1', models: [m] }, { name: 'b', base_url: 'http://y/v1', models: [m] }])).toThrow(/model m is already served by provider a/);
    expect(() => loadConfig({ ...base, SVC_NODE_MODEL_PRICES: '{"m":{"input_micro_usd_per_mtok":1.5}}' })).toThrow(/SVC_NODE_MODEL_PRICES: \.m\.input_micro_usd_per_mtok/);
    expect(loadConfig({ ...base, SVC_PROVIDERS: JSON.stringify([{ name: 'a', base_url: 'http://x/v1/', api_key: 'k', models: [m] }]) }).inference).toMatchObject({
      providers: [{ name: 'a', baseUrl: 'http://x/v1', apiKey: 'k', models: [{ id: 'm', inputMicroUsdPerMtok: 1, outputMicroUsdPerMtok: 2, maxOutputTokens: null, embedding: false }] }],
      timeoutMs: 300_000,
      defaultMaxOutputTokens: 4096,
      stallMs: 60_000,
    });
    expect(loadConfig({ ...base, SVC_INFERENCE_STALL_SECONDS: '5' }).inference.stallMs).toBe(5000);
    expect(() => loadConfig({ ...base, SVC_INFERENCE_STALL_SECONDS: '0' })).toThrow(/SVC_INFERENCE_STALL_SECONDS/);
  });
});

describe('catalog', () => {
  it('lists provider models with prices; a priced node model without an eligible node is not listed; media catalogs are empty', async () => {
    const page = await oa.models.list();
    expect(page.data).toEqual([
      { id: 'test-chat', object: 'model', created: expect.any(Number), owned_by: 'local', pricing: { input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT } },
      { id: 'test-embed', object: 'model', created: expect.any(Number), owned_by: 'local', pricing: { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 0 } },
      { id: 'test-reasoning', object: 'model', created: expect.any(Number), owned_by: 'local-openai', pricing: { input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT } },
    ]);
    for (const kind of ['images', 'videos']) expect(await (await fetch(`${t.url}/v1/${kind}/models`)).json()).toEqual({ object: 'list', data: [] });
    await expect(oa.chat.completions.create({ model: 'node-only', messages: user('hi') })).rejects.toMatchObject({ status: 404, param: 'model' });
  });
});

describe('chat completions (openai SDK)', () => {
  it('non-streamed: passes unknown fields through, charges the upstream usage at the model prices, signs a receipt', async () => {
    const before = (await position(acct.accountId)).balance_micro_usd;
    const { data, response } = await oa.chat.completions
      .create({ model: 'test-chat', messages: user('Say hello to the fox'), max_tokens: 50, seed: 7, svc_passthrough: { a: 1 } } as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .withResponse();
    expect(data.choices[0]!.message.content).toBe(REPLY());
    const usage = { prompt_tokens: 1 + 5, completion_tokens: words(REPLY()).length };
    expect(data.usage).toMatchObject(usage);
    const seen = up.requests.at(-1)!;
    expect(seen.body).toMatchObject({ model: 'test-chat', seed: 7, svc_passthrough: { a: 1 }, max_tokens: 50 });
    expect(seen.authorization).toBe('Bearer sk-upstream-test');
    const cost = usage.prompt_tokens * 2 + usage.completion_tokens * 5;
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(cost));
    const canonical = Buffer.from(response.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
    expect(verifyMessage(canonical, response.headers.get(RECEIPT_HEADERS.signature)!)).toBe(t.gw.services.signer.address);
    expect(JSON.parse(canonical)).toMatchObject({ kind: 'inference', model: 'test-chat', route: 'POST /v1/chat/completions', units: { input_tokens: 6, output_tokens: 11 }, cost_micro_usd: cost, detail: { backend: 'provider:local', usage_source: 'upstream', stream: false } });
    expect(await position(acct.accountId)).toMatchObject({ balance_micro_usd: before - cost, held_micro_usd: 0 });
  });

  it("a provider's answer with its usage goes out byte for byte as it came; one without is written again with the usage counted", async () => {
    const answer = '{ "id": "chatcmpl-raw", "object": "chat.completion", "created": 1, "model": "test-chat",\n  "choices": [ { "index": 0, "message": { "role": "assistant", "content": "Hi \\u00e9!" }, "finish_reason": "stop" } ],\n  "usage": { "prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5 }, "x_extra": [1, 2.50] }';
    const call = () =>
      fetch(`${t.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'test-chat', messages: user('hi') }) });
    up.switches.raw = { type: 'application/json', text: answer };
    const res = await call();
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(answer);
    expect(res.headers.get(RECEIPT_HEADERS.cost)).toBe(String(3 * 2 + 2 * 5));
    const bare = JSON.parse(answer) as Record<string, unknown>;
    delete bare.usage;
    up.switches.raw = { type: 'application/json', text: JSON.stringify(bare) };
    const counted = await call();
    const body = (await counted.json()) as { usage: { prompt_tokens: number; completion_tokens: number }; x_extra: unknown };
    expect(body.x_extra).toEqual([1, 2.5]);
    expect(body.usage.prompt_tokens).toBeGreaterThan(0);
    expect(counted.headers.get(RECEIPT_HEADERS.cost)).toBe(String(body.usage.prompt_tokens * 2 + body.usage.completion_tokens * 5));
  });

  it('streamed: the usage chunk forced upstream is dropped for a caller who did not ask; the receipt is charged on it', async () => {
    const { data: stream, response } = await oa.chat.completions.create({ model: 'test-chat', messages: user('Say hello to the fox'), stream: true }).withResponse();
    let text = '';
    let usageChunks = 0;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usageChunks++;
    }
    expect(text).toBe(REPLY());
    expect(usageChunks).toBe(0);
    expect(up.requests.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    const r = await receipt(response.headers.get(RECEIPT_HEADERS.id)!);
    expect(r).toMatchObject({ units: { input_tokens: 6, output_tokens: 11 }, cost_micro_usd: 6 * 2 + 11 * 5, detail: { stream: true, usage_source: 'upstream', outcome: 'completed' } });
  });

  it('streamed on the wire: usage chunk when asked, then data: [DONE], then event: receipt with a verifiable signature', async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'test-chat', messages: user('hi'), stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const frames = new SseParser().push(await res.text());
    const [usageFrame, done, last] = frames.slice(-3);
    expect(JSON.parse(usageFrame!.data)).toMatchObject({ choices: [], usage: { prompt_tokens: 2, completion_tokens: 11, total_tokens: 13 } });
    expect(done).toEqual({ event: null, data: '[DONE]' });
    expect(last!.event).toBe('receipt');
    const ev = JSON.parse(last!.data) as { type: string; id: string; canonical: string; signature: string; signer: string; receipt: { cost_micro_usd: number } };
    expect(ev.type).toBe('receipt');
    expect(ev.id).toBe(res.headers.get(RECEIPT_HEADERS.id));
    expect(verifyMessage(ev.canonical, ev.signature)).toBe(ev.signer);
    expect(ev.receipt.cost_micro_usd).toBe(2 * 2 + 11 * 5);
  });

  it('a stream whose upstream sends no usage is counted locally (~4 characters per token), and the caller gets that usage', async () => {
    up.switches.noUsage = true;
    const messages = user('Count me locally please');
    const stream = await oa.chat.completions.create({ model: 'test-chat', messages, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      usage = c.usage ?? usage;
    }
    const input = estimateChatInput({ messages });
    const output = estimateTokens(REPLY());
    expect(text).toBe(REPLY());
    expect(usage).toEqual({ prompt_tokens: input, completion_tokens: output, total_tokens: input + output });
    await committed();
    const ev = await t.gw.database.db.selectFrom('usage_events').selectAll().where('account_id', '=', acct.accountId).orderBy('n', 'desc').executeTakeFirstOrThrow();
    const r = await receipt(ev.receipt_id);
    expect(r.units).toEqual({ input_tokens: input, output_tokens: output });
    expect(r.cost_micro_usd).toBe(input * 2 + output * 5);
    expect(r.detail.usage_source).toBe('estimated');
  });

  it('a caller that disconnects mid-stream pays for what was delivered; the upstream is aborted', async () => {
    const a = await funded(FUND);
    const client = new OpenAI({ apiKey: a.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    up.switches.reply = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    up.switches.chunkDelayMs = 40;
    const messages = user('Tell me a long story');
    const { data: stream, response } = await client.chat.completions.create({ model: 'test-chat', messages, stream: true }).withResponse();
    let seen = '';
    let n = 0;
    for await (const c of stream) {
      seen += c.choices[0]?.delta?.content ?? '';
      if (++n === 6) break; // leaves: the SDK aborts the request
    }
    await until('upstream aborted', async () => up.requests.at(-1)!.aborted);
    const id = response.headers.get(RECEIPT_HEADERS.id)!;
    const r = await until('settled', () => receipt(id));
    expect(r.detail.outcome).toBe('client_disconnected');
    expect(r.units.input_tokens).toBe(estimateChatInput({ messages }));
    expect(r.units.output_tokens).toBeGreaterThanOrEqual(estimateTokens(seen));
    expect(r.units.output_tokens).toBeLessThan(estimateTokens(REPLY()) / 2);
    expect(r.cost_micro_usd).toBe(r.units.input_tokens * 2 + r.units.output_tokens * 5);
    expect(up.requests.at(-1)!.chunksSent).toBeLessThan(30);
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND - r.cost_micro_usd, held_micro_usd: 0 });
  });

  it("a chunk without choices that is not the usage chunk (Azure's prompt_filter_results) reaches a caller who did not ask for usage", async () => {
    const base = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'test-chat' };
    const frames = [
      { ...base, choices: [], prompt_filter_results: [{ prompt_index: 0, content_filter_results: {} }], usage: null },
      { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: 'Hi' }, finish_reason: null }], usage: null },
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null },
      { ...base, choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } },
    ];
    up.switches.raw = { type: 'text/event-stream', text: `${frames.map((f) => `data: ${JSON.stringify(f)}\n\n`).join('')}data: [DONE]\n\n` };
    const got: Array<Record<string, unknown>> = [];
    for await (const c of await oa.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })) got.push(c as unknown as Record<string, unknown>);
    expect(got[0]).toMatchObject({ choices: [], prompt_filter_results: [expect.any(Object)] });
    expect(got.some((c) => 'usage' in c)).toBe(false);
    expect(got.map((c) => (c.choices as Array<{ delta?: { content?: string } }>)[0]?.delta?.content ?? '').join('')).toBe('Hi');
  });
});

describe('failures', () => {
  it('402 before any upstream call when credit is short, for both SDKs (Anthropic error shape on /v1/messages)', async () => {
    const poor = await funded(100);
    const calls = up.requests.length;
    const o = new OpenAI({ apiKey: poor.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi'), max_tokens: 500 })).rejects.toMatchObject({ status: 402, type: 'insufficient_credit' });
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })).rejects.toMatchObject({ status: 402, type: 'insufficient_credit' });
    const a = new Anthropic({ authToken: poor.key, apiKey: null, baseURL: t.url, maxRetries: 0 });
    const err = (await a.messages.create({ model: 'test-chat', max_tokens: 500, messages: user('hi') }).catch((e: unknown) => e)) as InstanceType<typeof Anthropic.APIError>;
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(402);
    expect(err.error).toMatchObject({ type: 'error', error: { type: 'insufficient_credit', accepts: [expect.objectContaining({ scheme: 'exact' })] } });
    expect(up.requests.length).toBe(calls);
    expect(await position(poor.accountId)).toMatchObject({ balance_micro_usd: 100, held_micro_usd: 0 });
  });

  it('upstream 500 is our 502 upstream_error with no charge (streamed too: never a 200); upstream 400 is our 400', async () => {
    const a = await funded(FUND);
    const o = new OpenAI({ apiKey: a.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    up.switches.failWith = 500;
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi') })).rejects.toMatchObject({ status: 502, type: 'upstream_error' });
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })).rejects.toMatchObject({ status: 502, type: 'upstream_error' });
    const an2 = new Anthropic({ authToken: a.key, apiKey: null, baseURL: t.url, maxRetries: 0 });
    await expect(an2.messages.stream({ model: 'test-chat', max_tokens: 50, messages: user('hi') }).finalMessage()).rejects.toMatchObject({ status: 502 });
    up.switches.failWith = 400;
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi') })).rejects.toMatchObject({ status: 400, type: 'invalid_request', message: expect.stringContaining('something is wrong with this request') });
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND, held_micro_usd: 0 });
    expect(await usageEvents(a.accountId)).toBe(0);
  });

  it('a caller that leaves a non-streamed call before the answer aborts the upstream request and is charged nothing', async () => {
    const a = await funded(FUND);
    const o = new OpenAI({ apiKey: a.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    let release!: () => void;
    up.switches.holdUntil = new Promise<void>((r) => (release = r));
    const before = up.requests.length;
    const ac = new AbortController();
    const call = o.chat.completions.create({ model: 'test-chat', messages: user('hi') }, { signal: ac.signal });
    await until('upstream called', async () => up.requests.length > before);
    ac.abort();
    await expect(call).rejects.toThrow(/abort/i);
    await until('upstream aborted', async () => up.requests[before]!.aborted);
    release();
    await committed();
    expect(await usageEvents(a.accountId)).toBe(0);
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND, held_micro_usd: 0 });
  });

  it('failures an upstream answers under a 200 are errors of ours with no charge; a stream cut short is an error event after what it delivered', async () => {
    const a = await funded(FUND);
    const o = new OpenAI({ apiKey: a.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const sse = (...lines: string[]) => ({ type: 'text/event-stream', text: lines.map((l) => `${l}\n\n`).join('') });
    const chunk = (delta: object, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'test-chat', choices: [{ index: 0, delta, finish_reason: finish }] })}`;
    const drain = async (s: AsyncIterable<unknown>) => {
      for await (const _ of s) void _;
    };
    // llama.cpp's server: its error as an `error:` line (not an SSE field), then [DONE].
    up.switches.raw = sse('error: {"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}', 'data: [DONE]');
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })).rejects.toMatchObject({ status: 400, type: 'invalid_request', message: expect.stringContaining('exceeds the available context size') });
    // vLLM: an error chunk carrying its status as the first frame.
    up.switches.raw = sse('data: {"error":{"message":"prompt too long for context","type":"invalid_request_error","code":400}}');
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })).rejects.toMatchObject({ status: 400, type: 'invalid_request' });
    // A stream with nothing in it.
    up.switches.raw = sse('data: [DONE]');
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })).rejects.toMatchObject({ status: 502, type: 'upstream_error' });
    // A JSON error under a 200, with and without a status of its own; embeddings too.
    up.switches.raw = { type: 'application/json', text: '{"error":{"message":"model overloaded","code":503}}' };
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi') })).rejects.toMatchObject({ status: 502, type: 'upstream_error', message: expect.stringContaining('HTTP 503') });
    await expect(o.embeddings.create({ model: 'test-embed', input: 'hi' })).rejects.toMatchObject({ status: 502, type: 'upstream_error' });
    up.switches.raw = { type: 'application/json', text: '{"error":{"message":"bad temperature","type":"invalid_request_error"}}' };
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi') })).rejects.toMatchObject({ status: 400, type: 'invalid_request' });
    // A 429 passes on the upstream's Retry-After (streamed or not).
    up.switches.raw = { status: 429, type: 'application/json', text: '{"error":{"message":"slow down"}}', headers: { 'retry-after': '17' } };
    for (const stream of [false, true]) {
      const e = (await o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream }).catch((x: unknown) => x)) as InstanceType<typeof OpenAI.APIError>;
      expect(e).toMatchObject({ status: 429, type: 'rate_limited', error: expect.objectContaining({ retry_after: 17 }) });
      expect(e.headers?.get('retry-after')).toBe('17');
    }
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND, held_micro_usd: 0 });
    expect(await usageEvents(a.accountId)).toBe(0);

    // Cut short: content, then the connection closes cleanly with no finish_reason and no [DONE].
    up.switches.raw = sse(chunk({ role: 'assistant', content: '' }), chunk({ content: 'Hello wor' }));
    const seen: string[] = [];
    const err = await drain(
      (async function* () {
        for await (const c of await o.chat.completions.create({ model: 'test-chat', messages: user('hi'), stream: true })) yield seen.push(c.choices[0]?.delta?.content ?? '');
      })(),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect(String((err as Error).message)).toContain('ended the stream before finishing');
    expect(seen.join('')).toBe('Hello wor');
    await committed();
    const row = await t.gw.database.db.selectFrom('receipts').select('payload').where('account_id', '=', a.accountId).executeTakeFirstOrThrow();
    const r = JSON.parse(row.payload) as { cost_micro_usd: number; units: { output_tokens: number }; detail: { outcome: string } };
    expect(r.detail.outcome).toBe('upstream_error');
    expect(r.units.output_tokens).toBe(estimateTokens('Hello wor'));
    expect(r.cost_micro_usd).toBeGreaterThan(0);
  });

  it('an upstream slower than the time limit is our 504 upstream_timeout with no charge', async () => {
    const a = await funded(FUND);
    // The limit is 3 s (inference-env.ts); the upstream stays silent until the gateway has given up on it.
    let release!: () => void;
    up.switches.holdUntil = new Promise<void>((r) => (release = r));
    const o = new OpenAI({ apiKey: a.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    await expect(o.chat.completions.create({ model: 'test-chat', messages: user('hi') })).rejects.toMatchObject({ status: 504, type: 'upstream_timeout' });
    release();
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND, held_micro_usd: 0 });
  });

  it('previous_response_id is refused with a 400 naming it, before any upstream call', async () => {
    const calls = up.requests.length;
    await expect(oa.responses.create({ model: 'test-chat', input: 'hi', previous_response_id: 'resp_123' })).rejects.toMatchObject({ status: 400, param: 'previous_response_id', message: expect.stringContaining('previous_response_id') });
    expect(up.requests.length).toBe(calls);
  });
});

describe('embeddings (openai SDK)', () => {
  it('embeddings: vectors and a charge on the upstream usage', async () => {
    const { data, response } = await oa.embeddings.create({ model: 'test-embed', input: ['one two three', 'four five'] }).withResponse();
    expect(data.data.map((e) => e.embedding.length)).toEqual([8, 8]);
    expect(data.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 });
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe('5');
    expect((await receipt(response.headers.get(RECEIPT_HEADERS.id)!)).detail).toMatchObject({ usage_source: 'upstream' });
    await expect(oa.embeddings.create({ model: 'test-chat', input: 'x' })).rejects.toMatchObject({ status: 400, param: 'model' });
    // A usage without prompt_tokens: the local estimate is charged, and said to be one.
    up.switches.raw = { type: 'application/json', text: JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.1, 0.2] }], model: 'test-embed', usage: {} }) };
    const est = await oa.embeddings.create({ model: 'test-embed', input: 'one two three', encoding_format: 'float' }).withResponse();
    expect((await receipt(est.response.headers.get(RECEIPT_HEADERS.id)!)).detail).toMatchObject({ usage_source: 'estimated' });
  });
});
