import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, muteAgent, until, untilOnline, type TestAgent } from './support/agent.ts';
import { pausedPost } from './support/http.ts';
import { chatChunk, flood as floodOf, sse, startScriptedUpstream, type Handler, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * How an inference node's failures reach the caller: a real svc-node agent whose local server is a
 * scriptable HTTP handler on loopback, `model_map` local-llama -> a local name the caller must never see.
 */
const MODEL = 'local-llama';
const LOCAL = 'llama3:8b-secret-local';
const EMB = 'local-embed';
const BROKEN = 'broken-llama';
/** The same local server as a provider (the gateway calls it directly). */
const PROVIDED = 'direct-llama';
let t: TestGateway;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let oa: OpenAI;
let agent: TestAgent;
const agents: TestAgent[] = [];
const noDocker = { SVC_DOCKER_SOCKET: '/nonexistent/docker.sock' };
const msgs = [{ role: 'user' as const, content: 'Say hello' }];
/** SVC_INFERENCE_TIMEOUT_SECONDS: until an answer, and between two chunks of a stream. */
const LIMIT_S = 2;

let up: ScriptedUpstream;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const chunk = (content: string | null, finish: string | null = null) => chatChunk(LOCAL, content, finish);
const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};
const balance = async () => (await t.gw.services.metering.position(owner.accountId)).balance_micro_usd;
const apiError = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
const drain = async (stream: AsyncIterable<{ choices: Array<{ delta?: { content?: string | null } }> }>) => {
  let text = '';
  const err = await (async () => {
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  })().then(() => null, (e: unknown) => e as Error);
  return { text, err };
};

async function startNode(models: string[], map: Record<string, string>, url: string): Promise<TestAgent> {
  const a = await enrollAgent(t, owner.client, { kinds: ['inference'], models, model_map: map });
  agents.push(a);
  a.start({ SVC_INFERENCE_URL: url, ...noDocker });
  await untilOnline(t, a.nodeId);
  return a;
}

beforeAll(async () => {
  up = await startScriptedUpstream();
  const price = { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 3_000_000 };
  const providers = [{ name: 'direct', base_url: up.url, models: [{ id: PROVIDED, ...price }] }];
  t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_INFERENCE_TIMEOUT_SECONDS: String(LIMIT_S), SVC_PROVIDERS: JSON.stringify(providers), SVC_NODE_MODEL_PRICES: JSON.stringify({ [MODEL]: price, [BROKEN]: price, [EMB]: { input_micro_usd_per_mtok: 1_000_000, embedding: true } }) } });
  owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 100_000_000, 'grant', `test-${owner.accountId}`);
  oa = new OpenAI({ apiKey: (await owner.client.createKey()).key, baseURL: `${t.url}/v1`, maxRetries: 0 });
  agent = await startNode([MODEL, EMB], { [MODEL]: LOCAL, [EMB]: 'nomic-embed' }, up.url);
});
afterAll(async () => {
  for (const a of agents) await a.kill();
  await t?.close();
  await up?.close();
});

describe("a node's errors reach the caller without the node's internals", () => {
  it('a local 400 naming the local model names the public id instead, streamed or not', async () => {
    up.handler = (_q, _b, res) => json(res, 400, { error: { message: `registry.ollama.ai/library/${LOCAL} does not support tools`, type: 'api_error' } });
    for (const stream of [false, true]) {
      const e = await apiError(oa.chat.completions.create({ model: MODEL, messages: msgs, stream }));
      expect(e?.status).toBe(400);
      expect(e?.message).toContain(`registry.ollama.ai/library/${MODEL} does not support tools`);
      expect(JSON.stringify(e?.error)).not.toContain(LOCAL);
    }
  });

  it("an error chunk mid-stream is an error without the server's message (it names the local model and files)", async () => {
    up.handler = (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse(chunk('Hello')));
      res.end(sse({ error: { message: `model ${LOCAL} crashed: CUDA out of memory at /srv/ollama/models/blobs/sha256-abc` } }));
    };
    const { text, err } = await drain(await oa.chat.completions.create({ model: MODEL, messages: msgs, stream: true }));
    expect(text).toBe('Hello');
    expect(err?.message).toMatch(/failed mid-stream/);
    expect(err?.message).not.toMatch(new RegExp(`${LOCAL}|/srv/ollama|CUDA`));
  });

  it('a 200 that is not JSON, or JSON without choices or data, is a 502 that charges nothing', async () => {
    const before = await balance();
    up.handler = (_q, _b, res) => json(res, 200, `{"model":"${LOCAL}"x`);
    const notJson = await apiError(oa.chat.completions.create({ model: MODEL, messages: msgs }));
    expect(notJson?.status).toBe(502);
    expect(JSON.stringify(notJson?.error)).not.toMatch(/position|Unexpected|secret/);
    up.handler = (_q, _b, res) => json(res, 200, 'null');
    const nullAnswer = await apiError(oa.chat.completions.create({ model: MODEL, messages: msgs }));
    expect(nullAnswer?.status).toBe(502);
    expect(nullAnswer?.message).not.toMatch(/Cannot read|TypeError/);
    up.handler = (_q, _b, res) => json(res, 200, { object: 'chat.completion', model: LOCAL });
    const noChoices = await apiError(oa.chat.completions.create({ model: MODEL, messages: msgs }));
    expect(noChoices).toMatchObject({ status: 502, message: expect.stringMatching(/answered without choices/) });
    up.handler = (_q, _b, res) => json(res, 200, { object: 'list', model: 'nomic-embed', usage: { prompt_tokens: 2, total_tokens: 2 } });
    expect(await apiError(oa.embeddings.create({ model: EMB, input: 'hi' }))).toMatchObject({ status: 502, message: expect.stringMatching(/answered without data/) });
    await t.gw.services.metering.settledAll();
    expect(await balance()).toBe(before);
  });

  it('each node learns its own local name only, not the other nodes of the model', async () => {
    // A second node serving the model, declared faster so that it gets the call; it only takes jobs.
    const mute = await muteAgent(t, owner.client, { kinds: ['inference'], models: [MODEL], model_map: { [MODEL]: 'mute-local' }, speed_factor: 100 });
    const ac = new AbortController();
    try {
      const call = apiError(oa.chat.completions.create({ model: MODEL, messages: msgs }, { signal: ac.signal }));
      const job = await until('job at the mute node', async () => mute.got.find((m) => m.type === 'job'));
      expect((job as { payload: { local_models: Record<string, string> } }).payload.local_models).toEqual({ [mute.nodeId]: 'mute-local' });
      ac.abort();
      await call;
    } finally {
      await mute.close();
    }
  });
});

describe('answers a node cannot pass on whole', () => {
  it('a stream frame larger than the channel carries ends the stream in an error, never a completed stream with a hole', async () => {
    up.handler = (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(sse(chunk('Hello ')) + sse(chunk('y'.repeat(1_100_000))) + sse(chunk('world')) + sse(chunk(null, 'stop')) + sse('[DONE]'));
    };
    const { text, err } = await drain(await oa.chat.completions.create({ model: MODEL, messages: msgs, stream: true }));
    expect(text).toBe('Hello ');
    expect(err?.message).toMatch(/stream frame of \d+ characters/);
  });

  it('a non-streamed answer larger than the channel carries is a 502 saying so, tried on no other node; the channel stays up', async () => {
    const vec = Array.from({ length: 4096 }, (_, i) => -0.012345678901234 + i * 1e-9);
    // About 20 MB, written once before the call: the job's 2 s limit then covers the transfer, not this.
    const data = JSON.stringify(Array.from({ length: 250 }, (_, index) => ({ object: 'embedding', index, embedding: vec })));
    up.handler = (_q, body, res) => json(res, 200, `{"object":"list","data":${data},"model":${JSON.stringify(body.model)},"usage":{"prompt_tokens":250,"total_tokens":250}}`);
    const jobs = async () => (await t.gw.database.db.selectFrom('jobs').select('id').where('node_id', '=', agent.nodeId).execute()).length;
    const failures = async () => (await t.gw.database.db.selectFrom('nodes').select('failed').where('id', '=', agent.nodeId).executeTakeFirstOrThrow()).failed;
    const [before, failedBefore] = [await jobs(), await failures()];
    const e = await apiError(oa.embeddings.create({ model: EMB, input: Array.from({ length: 250 }, () => 'a'), encoding_format: 'float' }));
    expect(e).toMatchObject({ status: 502, message: expect.stringMatching(/larger than a node can send back/) });
    expect(await jobs()).toBe(before + 1);
    expect(await failures()).toBe(failedBefore); // the caller's ask, not the node's fault
    expect(agent.output()).not.toMatch(/channel closed \(1009\)/);
    expect(t.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
  });
});

const flood = (piece: string, total: number, wrote?: () => void) => floodOf(LOCAL, piece, total, wrote);

/** A streamed call whose caller reads the head, then nothing until it resumes `res`. */
const pausedStream = (model: string) => pausedPost(`${t.url}/v1/chat/completions`, oa.apiKey!, { model, messages: msgs, stream: true });

describe('a slow reader', () => {
  it.each([
    ['a provider', PROVIDED],
    ['a node (the agent stops reading its local server)', MODEL],
  ])('holds the stream of %s back instead of piling the answer up on the way', async (_who, model) => {
    up.seen.length = 0;
    const piece = 'x'.repeat(100_000);
    const TOTAL = 600; // 60 MB of content: a node stream holds about 14 MB on its way when it stops (the agent keeps up to two messages of 4 MiB)
    let written = 0;
    up.handler = flood(piece, TOTAL, () => written++);
    const { req, res } = await pausedStream(model); // reads the head, then nothing
    // The upstream stops writing while the caller reads nothing (with no backpressure it writes all of it).
    await until('the upstream held back', async () => {
      const w = written;
      await sleep(300);
      return written === w && w < TOTAL;
    }, 15_000);
    expect(written * piece.length).toBeLessThan(TOTAL * piece.length / 2);
    req.destroy();
    await until('upstream request aborted', async () => up.seen[0]?.aborted, 5_000);
  }, 30_000);
});

describe('a caller that pauses reading longer than the time limit, then reads on', () => {
  it.each([
    ['a provider', PROVIDED],
    ['a node', MODEL],
  ])('gets the whole answer of %s, and the node no failure nor lower figures', async (_who, model) => {
    up.seen.length = 0;
    const piece = 'y'.repeat(100_000);
    const TOTAL = 300; // 30 MB: more than the sockets on the way hold
    up.handler = flood(piece, TOTAL);
    const node = () => t.gw.database.db.selectFrom('nodes').select(['failed', 'succeeded', 'latency_ms', 'observed_speed']).where('id', '=', agent.nodeId).executeTakeFirstOrThrow();
    const before = await node();
    const { res } = await pausedStream(model);
    const PAUSE_MS = LIMIT_S * 1000 + 5_500; // past the limit, and past the control plane's backstop 5 s later: a caller busy for a while
    await sleep(PAUSE_MS);
    let tail = '';
    let n = 0;
    res.setEncoding('utf8');
    res.on('data', (d: string) => {
      n += d.split('y').length - 1;
      tail = (tail + d).slice(-4000);
    });
    res.resume();
    await new Promise((r) => res.on('end', r));
    expect(tail).not.toMatch(/"error"/);
    expect(tail).toMatch(/"finish_reason":"stop"/);
    expect(n).toBeGreaterThanOrEqual(TOTAL * piece.length); // every piece arrived
    if (model !== MODEL) return;
    const after = (await until('the job recorded', async () => ((await node()).succeeded > before.succeeded ? node() : null)))!;
    expect(after.failed).toBe(before.failed);
    // The caller's pause is not the node's time: a job its caller held back gives neither a latency sample
    // nor a speed sample (before, each took the whole pause, and the node's figures fell).
    expect({ latency: after.latency_ms, speed: after.observed_speed }).toEqual({ latency: before.latency_ms, speed: before.observed_speed });
  }, 60_000);
});

describe('time limits on the node path', () => {
  it("a stream's limit is between two chunks, not in all: a slow healthy stream completes; one that stalls fails after what it delivered", async () => {
    up.handler = async (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const w of ['one ', 'two ', 'three ', 'four']) {
        res.write(sse(chunk(w)));
        await sleep(LIMIT_S * 350); // 4 chunks: 1.4 x the limit in all, 0.35 of it between two
      }
      res.end(sse(chunk(null, 'stop')) + sse('[DONE]'));
    };
    expect(await drain(await oa.chat.completions.create({ model: MODEL, messages: msgs, stream: true }))).toEqual({ text: 'one two three four', err: null });
    up.handler = async (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse(chunk('Hello')));
      await sleep(LIMIT_S * 1500);
      if (!res.destroyed) res.end(sse('[DONE]'));
    };
    const stalled = await drain(await oa.chat.completions.create({ model: MODEL, messages: msgs, stream: true }));
    expect(stalled.text).toBe('Hello');
    expect(stalled.err?.message).toMatch(new RegExp(`no output for ${LIMIT_S * 1000} ms`));
  });
});

describe('node failures', () => {
  it('a caller leaving a node call, streamed or not, stops the local request and the agent carries on', async () => {
    const slow: Handler = async (_q, body, res) => {
      if (!body.stream) {
        await sleep(3000);
        return res.destroyed ? undefined : json(res, 200, { id: 'x', object: 'chat.completion', model: LOCAL, choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }] });
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (let i = 0; i < 100 && !res.destroyed; i++) {
        res.write(sse(chunk(`w${i} `)));
        await sleep(50);
      }
      res.end(sse('[DONE]'));
    };
    for (const stream of [true, false]) {
      up.seen.length = 0;
      up.handler = slow;
      const ac = new AbortController();
      if (stream) {
        const s = await oa.chat.completions.create({ model: MODEL, messages: msgs, stream: true }, { signal: ac.signal });
        let n = 0;
        await (async () => {
          for await (const _ of s) if (++n === 3) ac.abort();
        })().catch(() => undefined);
      } else {
        const p = oa.chat.completions.create({ model: MODEL, messages: msgs }, { signal: ac.signal }).catch(() => undefined);
        await until('request at the local server', async () => up.seen.length > 0, 5000);
        ac.abort();
        await p;
      }
      await until('local request aborted', async () => up.seen[0]?.aborted, 5000);
      // The agent is still up and serving: the next call is answered.
      up.handler = (_q, _b, res) => json(res, 200, { id: 'x', object: 'chat.completion', model: LOCAL, choices: [{ index: 0, message: { role: 'assistant', content: 'still here' }, finish_reason: 'stop' }] });
      expect((await oa.chat.completions.create({ model: MODEL, messages: msgs })).choices[0]!.message.content).toBe('still here');
      expect(agent.output()).not.toMatch(/TypeError|reading 'slice'/);
    }
  });

  it('a node whose local server cannot be reached records failed jobs and failures, not successes', async () => {
    const b = await startNode([BROKEN], { [BROKEN]: 'x' }, 'http://127.0.0.1:1/v1');
    for (let i = 0; i < 2; i++) expect((await apiError(oa.chat.completions.create({ model: BROKEN, messages: msgs })))?.status).toBe(502);
    const jobs = await t.gw.database.db.selectFrom('jobs').select(['status', 'error']).where('node_id', '=', b.nodeId).execute();
    expect(jobs).toEqual([
      { status: 'failed', error: 'local inference server: unreachable' },
      { status: 'failed', error: 'local inference server: unreachable' },
    ]);
    expect(await t.gw.database.db.selectFrom('nodes').select(['succeeded', 'failed']).where('id', '=', b.nodeId).executeTakeFirstOrThrow()).toEqual({ succeeded: 0, failed: 2 });
  });
});
