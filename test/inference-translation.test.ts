import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { RECEIPT_HEADERS, SseParser } from '@svc/shared';
import type { TestGateway } from './support/gateway.ts';
import type { TestUpstream } from './support/upstream.ts';
import { closeInferenceEnv, startInferenceEnv, storedReceipt, user } from './support/inference-env.ts';

/**
 * Anthropic Messages (@anthropic-ai/sdk) and OpenAI Responses (openai SDK) translated to chat completions,
 * streamed and not, against the gateway and a real OpenAI-compatible upstream on loopback (inference-env.ts):
 * requests, answers, event sequences, refusals, stop sequences, tool calls, fields passed through.
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

const receipt = (id: string) => storedReceipt(t, id);
const REPLY = () => up.switches.reply;

describe('messages (@anthropic-ai/sdk) and responses (openai SDK) over chat', () => {
  it('messages: translated request, Message answer with usage and stop_reason; the streamed event sequence ends in the receipt', async () => {
    const msg = await an.messages.create({ model: 'test-chat', max_tokens: 3, system: 'Be brief.', messages: user('Say hello') });
    expect(up.requests.at(-1)!.body).toMatchObject({ model: 'test-chat', max_tokens: 3, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello' }] });
    expect(msg).toMatchObject({ type: 'message', role: 'assistant', model: 'test-chat', content: [{ type: 'text', text: 'Hello there! The' }], stop_reason: 'max_tokens', usage: { input_tokens: 6, output_tokens: 3 } });

    const s = an.messages.stream({ model: 'test-chat', max_tokens: 100, system: 'Be brief.', messages: user('Say hello') });
    const types: string[] = [];
    s.on('streamEvent', (e) => types.at(-1) !== e.type && types.push(e.type));
    let text = '';
    s.on('text', (d) => (text += d));
    const final = await s.finalMessage();
    expect(text).toBe(REPLY());
    expect(final).toMatchObject({ content: [{ type: 'text', text: REPLY() }], stop_reason: 'end_turn', usage: { input_tokens: 6, output_tokens: 11 } });
    expect(types).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop', 'receipt']);
    const r = await receipt((await s.withResponse()).response.headers.get(RECEIPT_HEADERS.id)!);
    expect(r).toMatchObject({ route: 'POST /v1/messages', cost_micro_usd: 6 * 2 + 11 * 5, detail: { endpoint: 'messages', stream: true } });
  });

  it('messages: a text document becomes text; blocks a chat upstream cannot take are a 400 naming them, not dropped', async () => {
    await an.messages.create({
      model: 'test-chat',
      max_tokens: 3,
      messages: [{ role: 'user', content: [{ type: 'document', title: 'Notes', source: { type: 'text', media_type: 'text/plain', data: 'SECRET-DOC' } }, { type: 'text', text: 'summarise' }] }],
    });
    expect(up.requests.at(-1)!.body.messages).toEqual([{ role: 'user', content: 'Notes\n\nSECRET-DOCsummarise' }]);
    const calls = up.requests.length;
    const refused = async (messages: unknown, param: string) => {
      const e = (await an.messages.create({ model: 'test-chat', max_tokens: 3, messages: messages as never }).catch((x: unknown) => x)) as InstanceType<typeof Anthropic.APIError>;
      expect(e).toBeInstanceOf(Anthropic.APIError);
      expect(e.status).toBe(400);
      expect(e.error).toMatchObject({ type: 'error', error: { type: 'invalid_request', param } });
    };
    await refused([{ role: 'user', content: [{ type: 'text', text: 'read' }, { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }] }], 'messages[0].content[1]');
    await refused([{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f1' } }] }], 'messages[0].content[0]');
    await refused(
      [
        { role: 'user', content: 'weather?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'w', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'image', source: { type: 'url', url: 'http://x/y.png' } }] }] },
      ],
      'messages[2].content[0].content[0]',
    );
    await refused([{ role: 'user', content: [{ type: 'search_result', source: 'x', title: 't', content: [] }] }], 'messages[0].content[0]');
    expect(up.requests.length).toBe(calls);
  });

  it('a refusal is the answer on messages (text, stop_reason refusal) and responses (a refusal part); a stop sequence the upstream names is stop_sequence', async () => {
    const usage = { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 };
    const answer = (message: object, extra: object = {}) => ({ type: 'application/json', text: JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'test-chat', choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: 'stop', ...extra }], usage }) });
    const chunk = (delta: object, finish: string | null = null, extra: object = {}) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'test-chat', choices: [{ index: 0, delta, finish_reason: finish, ...extra }] })}\n\n`;
    const stream = (...frames: string[]) => ({ type: 'text/event-stream', text: `${frames.join('')}data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'test-chat', choices: [], usage })}\n\ndata: [DONE]\n\n` });
    const refusal = "I can't help with that.";

    up.switches.raw = answer({ content: null, refusal });
    expect(await an.messages.create({ model: 'test-chat', max_tokens: 50, messages: user('hi') })).toMatchObject({ content: [{ type: 'text', text: refusal }], stop_reason: 'refusal', stop_sequence: null });
    const resp = await oa.responses.create({ model: 'test-chat', input: 'hi' });
    expect(resp.output).toEqual([expect.objectContaining({ type: 'message', content: [{ type: 'refusal', refusal }] })]);

    up.switches.raw = stream(chunk({ role: 'assistant', content: '' }), chunk({ refusal: "I can't" }), chunk({ refusal: ' help with that.' }), chunk({}, 'stop'));
    const s = an.messages.stream({ model: 'test-chat', max_tokens: 50, messages: user('hi') });
    expect(await s.finalMessage()).toMatchObject({ content: [{ type: 'text', text: refusal }], stop_reason: 'refusal' });
    const events: string[] = [];
    let done: unknown = null;
    for await (const e of await oa.responses.create({ model: 'test-chat', input: 'hi', stream: true })) {
      events.push(e.type);
      if (e.type === 'response.completed') done = e.response.output;
    }
    expect(events.filter((e) => e.startsWith('response.refusal'))).toEqual(['response.refusal.delta', 'response.refusal.delta', 'response.refusal.done']);
    expect(done).toEqual([expect.objectContaining({ content: [{ type: 'refusal', refusal }] })]);

    // vLLM names the stop string it matched in stop_reason beside finish_reason "stop".
    up.switches.raw = answer({ content: 'one two' }, { stop_reason: 'END' });
    expect(await an.messages.create({ model: 'test-chat', max_tokens: 50, stop_sequences: ['END'], messages: user('count') })).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    expect(up.requests.at(-1)!.body.stop).toEqual(['END']);
    up.switches.raw = stream(chunk({ role: 'assistant', content: '' }), chunk({ content: 'one two' }), chunk({}, 'stop', { stop_reason: 'END' }));
    expect(await an.messages.stream({ model: 'test-chat', max_tokens: 50, stop_sequences: ['END'], messages: user('count') }).finalMessage()).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'END' });
    // A stop string that is not one of the caller's is an ordinary end_turn.
    up.switches.raw = answer({ content: 'one two' }, { stop_reason: 'other' });
    expect(await an.messages.create({ model: 'test-chat', max_tokens: 50, stop_sequences: ['END'], messages: user('count') })).toMatchObject({ stop_reason: 'end_turn', stop_sequence: null });
  });

  it('tool calls streamed without an index (each whole, with its own id) stay apart on messages and responses', async () => {
    const usage = { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 };
    const chunk = (delta: object, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'test-chat', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    const call = (id: string, city: string) => ({ tool_calls: [{ id, type: 'function', function: { name: 'weather', arguments: JSON.stringify({ city }) } }] });
    up.switches.raw = {
      type: 'text/event-stream',
      text: `${chunk({ role: 'assistant', content: null })}${chunk(call('call_a', 'Oslo'))}${chunk(call('call_b', 'Rome'))}${chunk({}, 'tool_calls')}data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'test-chat', choices: [], usage })}\n\ndata: [DONE]\n\n`,
    };
    const tools = [{ name: 'weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } } } }];
    const m = await an.messages.stream({ model: 'test-chat', max_tokens: 50, tools, messages: user('weather?') }).finalMessage();
    expect(m.content).toEqual([
      { type: 'tool_use', id: 'call_a', name: 'weather', input: { city: 'Oslo' } },
      { type: 'tool_use', id: 'call_b', name: 'weather', input: { city: 'Rome' } },
    ]);
    expect(m.stop_reason).toBe('tool_use');
    let output: unknown = null;
    for await (const e of await oa.responses.create({ model: 'test-chat', input: 'weather?', stream: true, tools: [{ type: 'function', name: 'weather', parameters: {}, strict: false }] })) {
      if (e.type === 'response.completed') output = e.response.output;
    }
    expect(output).toEqual([expect.objectContaining({ call_id: 'call_a', arguments: '{"city":"Oslo"}' }), expect.objectContaining({ call_id: 'call_b', arguments: '{"city":"Rome"}' })]);
  });

  it('messages and responses pass fields they do not translate to the upstream unchanged; their own with no chat counterpart go no further', async () => {
    await an.messages.create({ model: 'test-chat', max_tokens: 3, messages: user('hi'), seed: 7, frequency_penalty: 0.5, thinking: { type: 'enabled', budget_tokens: 1024 }, anthropic_version: 'vertex-2023-10-16', logit_bias: null } as never);
    const m = up.requests.at(-1)!.body;
    expect(m).toMatchObject({ seed: 7, frequency_penalty: 0.5, max_tokens: 3 });
    for (const k of ['thinking', 'anthropic_version', 'logit_bias']) expect(m).not.toHaveProperty(k);
    await oa.responses.create({ model: 'test-chat', input: 'hi', seed: 7, reasoning: { effort: 'low' }, store: true, top_logprobs: 2 } as never);
    const r = up.requests.at(-1)!.body;
    expect(r).toMatchObject({ seed: 7, reasoning_effort: 'low', logprobs: true, top_logprobs: 2, messages: [{ role: 'user', content: 'hi' }] });
    for (const k of ['reasoning', 'store', 'input']) expect(r).not.toHaveProperty(k);
  });

  it('responses: output_text and usage, streamed and not', async () => {
    const r = await oa.responses.create({ model: 'test-chat', instructions: 'Be brief.', input: 'Say hello' });
    expect(r.output_text).toBe(REPLY());
    expect(r.usage).toMatchObject({ input_tokens: 6, output_tokens: 11, total_tokens: 17 });
    // What the caller asked for is echoed, as OpenAI does.
    const echo = await oa.responses.create({ model: 'test-chat', input: 'hi', parallel_tool_calls: false, metadata: { run: '7' }, text: { format: { type: 'json_object' } } });
    expect(echo).toMatchObject({ parallel_tool_calls: false, metadata: { run: '7' }, text: { format: { type: 'json_object' } } });
    expect(up.requests.at(-1)!.body).toMatchObject({ response_format: { type: 'json_object' }, parallel_tool_calls: false });
    const s = oa.responses.stream({ model: 'test-chat', input: [{ role: 'user', content: 'Say hello' }] });
    let deltas = '';
    s.on('response.output_text.delta', (e) => (deltas += e.delta));
    const final = await s.finalResponse();
    expect(deltas).toBe(REPLY());
    expect(final.output_text).toBe(REPLY());
    expect(final).toMatchObject({ status: 'completed', usage: { input_tokens: 3, output_tokens: 11 } });
    const last = new SseParser().push(await (await fetch(`${t.url}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${acct.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'test-chat', input: 'hi', stream: true }) })).text()).slice(-2);
    expect(last.map((f) => [f.event, JSON.parse(f.data).type])).toEqual([['response.completed', 'response.completed'], ['receipt', 'keepalive']]);
    expect(JSON.parse(last[1]!.data)).toMatchObject({ receipt: { route: 'POST /v1/responses', cost_micro_usd: 2 * 2 + 11 * 5 } });
  });
});

describe('the output bound reaches the upstream in the field it reads', () => {
  const charged = async (id: string | null) => (await receipt(id!)) as Awaited<ReturnType<typeof receipt>> & { detail: { capped_at_hold?: boolean } };

  it('a provider reading max_completion_tokens (OpenAI reasoning models refuse max_tokens) gets the bound of every shape there', async () => {
    up.switches.limitField = 'max_completion_tokens';
    const sent = () => up.requests.at(-1)!.body;
    const m = await an.messages.create({ model: 'test-reasoning', max_tokens: 3, messages: user('hi') });
    expect(m).toMatchObject({ content: [{ type: 'text', text: 'Hello there! The' }], stop_reason: 'max_tokens' });
    expect(sent()).toMatchObject({ max_completion_tokens: 3 });
    expect(sent()).not.toHaveProperty('max_tokens');
    const s = await an.messages.stream({ model: 'test-reasoning', max_tokens: 2, messages: user('hi') }).finalMessage();
    expect(s).toMatchObject({ content: [{ type: 'text', text: 'Hello there!' }], stop_reason: 'max_tokens' });
    expect(sent()).toMatchObject({ stream: true, max_completion_tokens: 2 });
    const r = await oa.responses.create({ model: 'test-reasoning', input: 'hi', max_output_tokens: 4 });
    expect(r).toMatchObject({ output_text: 'Hello there! The quick', status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    expect(sent()).toMatchObject({ max_completion_tokens: 4 });
    const c = await oa.chat.completions.create({ model: 'test-reasoning', messages: user('hi'), max_tokens: 1 });
    expect(c.choices[0]).toMatchObject({ message: { content: 'Hello' }, finish_reason: 'length' });
    expect(sent()).toEqual(expect.objectContaining({ max_completion_tokens: 1 }));
    expect(sent()).not.toHaveProperty('max_tokens');
  });

  it("a provider configured without output_limit_field gets the bound in the caller's field", async () => {
    const { data, response } = await oa.chat.completions.create({ model: 'test-chat', messages: user('hi'), max_completion_tokens: 2 }).withResponse();
    expect(data.choices[0]).toMatchObject({ message: { content: 'Hello there!' }, finish_reason: 'length' });
    expect(up.requests.at(-1)!.body).toMatchObject({ max_completion_tokens: 2 });
    expect(up.requests.at(-1)!.body).not.toHaveProperty('max_tokens');
    const r = await charged(response.headers.get(RECEIPT_HEADERS.id));
    expect(r).toMatchObject({ units: { output_tokens: 2 }, cost_micro_usd: 2 * 2 + 2 * 5 });
    expect(r.detail.capped_at_hold).toBeUndefined();
  });
});
