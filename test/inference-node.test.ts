import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { RECEIPT_HEADERS } from '@svc/shared';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, untilOnline, type TestAgent } from './support/agent.ts';
import { startUpstream, words, type TestUpstream } from './support/upstream.ts';

/**
 * Inference through the fleet: a real svc-node agent process enrolled as an inference node declaring
 * `local-llama` (model_map -> `llama3:8b`), whose SVC_INFERENCE_URL is a real OpenAI-compatible server on
 * loopback. Prices: 1 micro-USD per input token, 3 per output token.
 */
const MODEL = 'local-llama';
const LOCAL = 'llama3:8b';
let up: TestUpstream;
let t: TestGateway;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let key: string;
let oa: OpenAI;
const agents: TestAgent[] = [];
const noDocker = { SVC_DOCKER_SOCKET: '/nonexistent/docker.sock' };

beforeAll(async () => {
  up = await startUpstream();
  t = await startTestGateway({
    reconnectGraceMs: 1500,
    env: {
      ...ENFORCED_BILLING,
      SVC_NODE_MODEL_PRICES: JSON.stringify({ [MODEL]: { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 3_000_000 } }),
      SVC_ASSISTANT_MODEL: MODEL,
    },
  });
  owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 10_000_000, 'grant', `test-${owner.accountId}`);
  key = (await owner.client.createKey()).key;
  oa = new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterAll(async () => {
  for (const a of agents) await a.kill();
  await t?.close();
  await up?.close();
});

async function inferenceAgent(url: string, speed = 1): Promise<TestAgent> {
  const body = { kinds: ['inference'], models: [MODEL], model_map: { [MODEL]: LOCAL }, speed_factor: speed };
  const a = await enrollAgent(t, owner.client, body);
  agents.push(a);
  a.start({ SVC_INFERENCE_URL: url, ...noDocker });
  await untilOnline(t, a.nodeId);
  return a;
}
const receipt = async (id: string) => JSON.parse((await t.gw.services.metering.settledAll(), await t.gw.database.db.selectFrom('receipts').select('payload').where('id', '=', id).executeTakeFirstOrThrow()).payload);
const jobsOf = (nodeId: string) => t.gw.database.db.selectFrom('jobs').selectAll().where('node_id', '=', nodeId).orderBy('created_at').execute();

let a: TestAgent;
describe('an inference node', () => {
  it('its priced model is listed only once the node is eligible', async () => {
    expect((await oa.models.list()).data).toEqual([]);
    a = await inferenceAgent(up.url);
    expect((await oa.models.list()).data).toEqual([{ id: MODEL, object: 'model', created: expect.any(Number), owned_by: 'fleet', pricing: { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 3_000_000 } }]);
  });

  it('serves chat (openai SDK, not streamed) under its local model name; the caller sees the public id and pays node prices', async () => {
    // Local servers read the bound from max_tokens (Ollama ignores max_completion_tokens): the gateway moves it there.
    up.switches.limitField = 'max_tokens';
    const { data, response } = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], temperature: 0.2, max_completion_tokens: 50 }).withResponse();
    up.switches.limitField = null;
    expect(up.requests.at(-1)!.body).toMatchObject({ model: LOCAL, temperature: 0.2, max_tokens: 50 });
    expect(up.requests.at(-1)!.body).not.toHaveProperty('max_completion_tokens');
    expect(data).toMatchObject({ model: MODEL, choices: [{ message: { content: up.switches.reply } }], usage: { prompt_tokens: 3, completion_tokens: 11 } });
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(3 * 1 + 11 * 3));
    expect(await receipt(response.headers.get(RECEIPT_HEADERS.id)!)).toMatchObject({ model: MODEL, units: { input_tokens: 3, output_tokens: 11 }, detail: { backend: `node:${a.nodeId}`, usage_source: 'upstream' } });
    expect((await jobsOf(a.nodeId)).map((j) => [j.kind, j.status])).toEqual([['inference.chat', 'succeeded']]);
  });

  it('streams chat (openai SDK) and messages (@anthropic-ai/sdk) through the agent; output tokens feed the speed check', async () => {
    const { data: stream, response } = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], stream: true }).withResponse();
    let text = '';
    const models = new Set<string>();
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      models.add(c.model);
    }
    expect(text).toBe(up.switches.reply);
    expect([...models]).toEqual([MODEL]);
    expect(up.requests.at(-1)!.body).toMatchObject({ model: LOCAL, stream: true, stream_options: { include_usage: true } });
    expect(await receipt(response.headers.get(RECEIPT_HEADERS.id)!)).toMatchObject({ cost_micro_usd: 3 + 33, detail: { stream: true, usage_source: 'upstream', outcome: 'completed' } });

    const an = new Anthropic({ authToken: key, apiKey: null, baseURL: t.url, maxRetries: 0 });
    const final = await an.messages.stream({ model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: 'Say hello' }] }).finalMessage();
    expect(final).toMatchObject({ model: MODEL, content: [{ type: 'text', text: words(up.switches.reply).slice(0, 5).join(' ') }], stop_reason: 'max_tokens', usage: { input_tokens: 3, output_tokens: 5 } });
    const node = await t.gw.database.db.selectFrom('nodes').selectAll().where('id', '=', a.nodeId).executeTakeFirstOrThrow();
    expect(node.observed_speed).toBeGreaterThan(0);
    expect(node.succeeded).toBe(3);
  });

  it('the keyless assistant answered by a node persists nothing: no job row once it ended, no receipt, no usage', async () => {
    const db = t.gw.database.db;
    const count = async (table: 'receipts' | 'usage_events' | 'holds' | 'ledger_entries' | 'jobs') => Number((await db.selectFrom(table).select(db.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const counts = async () => ({ receipts: await count('receipts'), usage: await count('usage_events'), holds: await count('holds'), ledger: await count('ledger_entries'), jobs: await count('jobs') });
    await t.gw.services.metering.settledAll();
    const before = await counts();
    const res = await fetch(`${t.url}/v1/assistant`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }) });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { message: { content: string } }).message.content).toBe(up.switches.reply);
    expect(up.requests.at(-1)!.body).toMatchObject({ model: LOCAL });
    expect(await counts()).toEqual(before);
  });

  it('a node lost before its first byte: the job runs again on another node', async () => {
    // A faster-declared node whose local server accepts and never answers; its agent dies mid-job.
    const sockets: Socket[] = [];
    const hang: Server = createServer((s) => void sockets.push(s));
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
    try {
      const b = await inferenceAgent(`http://127.0.0.1:${(hang.address() as { port: number }).port}/v1`, 100);
      const pending = oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], stream: true });
      await until('job on the hanging node', async () => t.gw.fleet.hub.openJobs().some((j) => j.nodeId === b.nodeId));
      await b.kill();
      agents.splice(agents.indexOf(b), 1); // killed by a signal: TestAgent.kill() would wait for an exit already seen
      let text = '';
      for await (const c of await pending) text += c.choices[0]?.delta?.content ?? '';
      expect(text).toBe(up.switches.reply);
      expect((await jobsOf(b.nodeId)).map((j) => [j.status, j.error])).toEqual([['failed', 'node lost']]);
      expect((await jobsOf(a.nodeId)).at(-1)).toMatchObject({ status: 'succeeded', attempts: 2 });
    } finally {
      for (const s of sockets) s.destroy();
      hang.close();
    }
  });
});
