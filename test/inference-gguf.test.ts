import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { RECEIPT_HEADERS } from '@svc/shared';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, untilOnline, type TestAgent } from './support/agent.ts';
import { renderPrompt, startLlamaServer, type LlamaServer } from './support/llama-server.ts';
import { boundChatInput, estimateChatInput } from '../control-plane/src/modules/inference/tokens.ts';

/**
 * A real model engine end to end: llama.cpp (node-llama-cpp's prebuilt binary) runs the tiny random GGUF
 * model of support/gguf.ts behind an OpenAI-compatible server on loopback; a real svc-node agent process
 * enrolled for `tiny-llama` (model_map -> the server's local name) proxies to it; the official `openai`
 * client calls the gateway. Tokens, token counts and charges are the engine's own, not a stand-in's.
 * Prices: 2 micro-USD per input token, 7 per output token.
 *
 * The gateway holds the most prompt tokens the text can make (its UTF-8 bytes plus chat-template margins)
 * plus max_tokens (else 4096) of output before a call, and caps the charge at that hold. This engine's
 * byte-level vocabulary makes about one token per byte, the worst case the bound is built for: every call
 * is charged its full tokens x prices, with max_tokens or without.
 */
const MODEL = 'tiny-llama';
const IN_PRICE = 2_000_000;
const OUT_PRICE = 7_000_000;
let llm: LlamaServer;
let t: TestGateway;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let oa: OpenAI;
let agent: TestAgent;

beforeAll(async () => {
  llm = await startLlamaServer({ modelName: 'tiny-llama:q0' });
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_NODE_MODEL_PRICES: JSON.stringify({ [MODEL]: { input_micro_usd_per_mtok: IN_PRICE, output_micro_usd_per_mtok: OUT_PRICE } }),
    },
  });
  owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 10_000_000, 'grant', `test-${owner.accountId}`);
  oa = new OpenAI({ apiKey: (await owner.client.createKey()).key, baseURL: `${t.url}/v1`, maxRetries: 0 });
  agent = await enrollAgent(t, owner.client, { kinds: ['inference'], models: [MODEL], model_map: { [MODEL]: llm.modelName } } as Parameters<typeof enrollAgent>[2]);
  agent.start({ SVC_INFERENCE_URL: llm.url, SVC_DOCKER_SOCKET: '/nonexistent/docker.sock' });
  await untilOnline(t, agent.nodeId);
});
afterAll(async () => {
  await agent?.kill();
  await t?.close();
  await llm?.close();
});

const cost = (input: number, output: number) => Math.ceil((input * IN_PRICE + output * OUT_PRICE) / 1_000_000);
const CONTEXT = 256;
/** The receipt and the ledger entry of one billed response. */
async function charged(receiptId: string) {
  const db = t.gw.database.db;
  await t.gw.services.metering.settledAll(); // answers come before their settle commits (write-behind)
  const receipt = JSON.parse((await db.selectFrom('receipts').select('payload').where('id', '=', receiptId).executeTakeFirstOrThrow()).payload);
  const event = await db.selectFrom('usage_events').select(['id', 'cost_micro_usd']).where('receipt_id', '=', receiptId).executeTakeFirstOrThrow();
  const ledger = await db.selectFrom('ledger_entries').select(['amount_micro_usd', 'kind']).where('ref', '=', event.id).execute();
  return { receipt, event, ledger };
}
const balance = async () => (await t.gw.services.metering.settledAll(), await t.gw.database.db.selectFrom('credit_accounts').select('balance_micro_usd').where('account_id', '=', owner.accountId).executeTakeFirstOrThrow()).balance_micro_usd;

describe('a node running a real model engine (llama.cpp, tiny random GGUF)', () => {
  it('the local server lists its local name; the gateway lists the public id at node prices', async () => {
    expect(await (await fetch(`${llm.url}/models`)).json()).toMatchObject({ object: 'list', data: [{ id: llm.modelName, object: 'model' }] });
    expect((await oa.models.list()).data).toEqual([expect.objectContaining({ id: MODEL, owned_by: 'fleet', pricing: { input_micro_usd_per_mtok: IN_PRICE, output_micro_usd_per_mtok: OUT_PRICE } })]);
  });

  it('streams generated tokens; usage is the engine count and the charge is tokens x prices', async () => {
    const messages = [
      { role: 'system' as const, content: 'You are terse.' },
      { role: 'user' as const, content: 'Say hello to the wörld ✓' },
    ];
    const before = await balance();
    const { data: stream, response } = await oa.chat.completions.create({ model: MODEL, messages, stream: true, stream_options: { include_usage: true } }).withResponse();
    const pieces: string[] = [];
    const finish: Array<string | null> = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const c of stream) {
      expect(c.model).toBe(MODEL);
      const d = c.choices[0]?.delta?.content;
      if (d) pieces.push(d);
      if (c.choices[0]?.finish_reason) finish.push(c.choices[0].finish_reason);
      if (c.usage) usage = c.usage;
    }
    const engine = llm.completions.at(-1)!;
    // The engine's prompt count is its tokenizer's: BOS + the rendered prompt's tokens (one a byte here).
    const prompt = 1 + llm.engine.model.tokenize(renderPrompt(messages)).length;
    expect(prompt).toBeGreaterThan(50);
    // Without max_tokens the engine generates until its context is full.
    const generated = CONTEXT - prompt;
    expect(engine).toMatchObject({ model: llm.modelName, stream: true, promptTokens: prompt, completionTokens: generated, finishReason: 'length', aborted: false });
    expect(pieces.length).toBeGreaterThan(10);
    expect(pieces.join('')).toBe(engine.text);
    expect(engine.text).toMatch(new RegExp(`^[\\x20-\\x7e]{${generated}}$`)); // the tiny model generates printable one-byte tokens only
    expect(finish).toEqual(['length']);
    expect(usage).toEqual({ prompt_tokens: prompt, completion_tokens: generated, total_tokens: CONTEXT });

    const price = cost(prompt, generated);
    const { receipt, event, ledger } = await charged(response.headers.get(RECEIPT_HEADERS.id)!);
    expect(receipt).toMatchObject({ model: MODEL, cost_micro_usd: price, units: { input_tokens: prompt, output_tokens: generated }, detail: { backend: `node:${agent.nodeId}`, stream: true, usage_source: 'upstream', outcome: 'completed' } });
    expect(receipt.detail.capped_at_hold).toBeUndefined();
    expect(event.cost_micro_usd).toBe(price);
    expect(ledger).toEqual([{ amount_micro_usd: -price, kind: 'usage' }]);
    expect(await balance()).toBe(before - price);
  });

  it('answers unstreamed with max_tokens honoured (finish_reason "length") and the engine counts billed', async () => {
    const messages = [{ role: 'user' as const, content: 'Count to ten' }];
    const { data, response } = await oa.chat.completions.create({ model: MODEL, messages, max_tokens: 5, temperature: 0.7, seed: 3 }).withResponse();
    const engine = llm.completions.at(-1)!;
    expect(engine).toMatchObject({ model: llm.modelName, stream: false, completionTokens: 5, finishReason: 'length' });
    expect(engine.promptTokens).toBe(1 + llm.engine.model.tokenize(renderPrompt(messages)).length);
    expect(data).toMatchObject({
      model: MODEL,
      choices: [{ message: { role: 'assistant', content: engine.text }, finish_reason: 'length' }],
      usage: { prompt_tokens: engine.promptTokens, completion_tokens: 5, total_tokens: engine.promptTokens + 5 },
    });
    expect(engine.text).toMatch(/^[\x20-\x7e]{5}$/);
    // Billed in full on the engine's counts: the hold bounds a byte-level prompt (see the top of this file).
    const price = cost(engine.promptTokens, 5);
    expect(engine.promptTokens).toBeGreaterThan(estimateChatInput({ messages })); // the ~4-characters estimate would undercharge
    expect(engine.promptTokens).toBeLessThanOrEqual(boundChatInput({ messages }));
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(price));
    const { receipt, ledger } = await charged(response.headers.get(RECEIPT_HEADERS.id)!);
    expect(receipt).toMatchObject({ cost_micro_usd: price, units: { input_tokens: engine.promptTokens, output_tokens: 5 }, detail: { usage_source: 'upstream' } });
    expect(receipt.detail.capped_at_hold).toBeUndefined();
    expect(ledger).toEqual([{ amount_micro_usd: -price, kind: 'usage' }]);

    // The same seed gives the same tokens: the engine, not the gateway, decides the text.
    const again = await oa.chat.completions.create({ model: MODEL, messages, max_tokens: 5, temperature: 0.7, seed: 3 });
    expect(again.choices[0]!.message.content).toBe(engine.text);
  });
});
