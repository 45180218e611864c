import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { RECEIPT_HEADERS } from '@svc/shared';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startLlamaServer, type LlamaServer } from './support/llama-server.ts';

/**
 * A provider given by its base URL alone (SVC_PROVIDERS=http://127.0.0.1:PORT/v1): the gateway lists the models
 * its upstream lists on GET /v1/models, at zero prices until the operator sets them, says so in a boot log line,
 * and lists them again every SVC_PROVIDERS_REFRESH_SECONDS (the test moves the injected clock and drives the
 * refresh). The upstream is a real engine: llama.cpp serving the tiny GGUF model of support/gguf.ts; the caller
 * is the stock `openai` client.
 */
const REFRESH_S = 60;
let llm: LlamaServer;
let t: TestGateway;
let oa: OpenAI;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
const lines: Array<{ level: number; msg: string; [k: string]: unknown }> = [];
const logger = { level: 'info', stream: { write: (l: string) => void lines.push(JSON.parse(l)) } };
const providerName = (url: string) => new URL(url).host.replace(':', '-');

beforeAll(async () => {
  llm = await startLlamaServer({ modelName: 'tiny-llama:q0' });
  t = await startTestGateway({ env: { SVC_PROVIDERS: llm.url, SVC_PROVIDERS_REFRESH_SECONDS: String(REFRESH_S) }, logger });
  owner = await t.signIn();
  oa = new OpenAI({ apiKey: (await owner.client.createKey()).key, baseURL: `${t.url}/v1`, maxRetries: 0 });
}, 120_000);
afterAll(async () => {
  await t?.close();
  await llm?.close();
});

describe('a provider given by its base URL alone', () => {
  it("lists the upstream's models at zero prices, and a boot log line says so", async () => {
    expect((await oa.models.list()).data).toEqual([
      expect.objectContaining({ id: 'tiny-llama:q0', object: 'model', owned_by: providerName(llm.url), pricing: { input_micro_usd_per_mtok: 0, output_micro_usd_per_mtok: 0 } }),
    ]);
    const boot = lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith(`provider ${providerName(llm.url)}:`));
    expect(boot?.msg).toBe(`provider ${providerName(llm.url)}: 1 models from GET ${llm.url}/models; all priced at zero (tiny-llama:q0) until SVC_PROVIDERS prices them (docs/inference.md)`);
    expect(boot).toMatchObject({ level: 30, models: ['tiny-llama:q0'], zero_priced: ['tiny-llama:q0'] });
  });

  it('answers a streamed chat through the stock openai client, metered at zero with a receipt', async () => {
    const { data: stream, response } = await oa.chat.completions.create({ model: 'tiny-llama:q0', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4, stream: true, stream_options: { include_usage: true } }).withResponse();
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(response.headers.get(RECEIPT_HEADERS.id)).toMatch(/^req_/);
    expect(usage?.completion_tokens).toBe(4);
    expect(text.length).toBeGreaterThan(0);
    expect(llm.completions.at(-1)).toMatchObject({ model: 'tiny-llama:q0', completionTokens: 4 });
    await t.gw.services.metering.settledAll(); // answers come before their settle commits (write-behind)
    const receipt = await owner.client.receipt(response.headers.get(RECEIPT_HEADERS.id)!);
    expect(receipt).toMatchObject({ kind: 'inference', payload: { cost_micro_usd: 0, model: 'tiny-llama:q0' } });
  });

  it('lists again only when the refresh interval has passed: a model gone upstream stops being listed, a new one appears', async () => {
    llm.serveAs('tiny-llama:q1');
    const discovery = t.gw.services.inference.catalog.discovery;
    t.clock.advance((REFRESH_S - 1) * 1000);
    await discovery.tick(); // not due yet: the list stays as it was
    expect((await oa.models.list()).data.map((m) => m.id)).toEqual(['tiny-llama:q0']);

    t.clock.advance(1000);
    await discovery.tick();
    expect((await oa.models.list()).data.map((m) => m.id)).toEqual(['tiny-llama:q1']);
    await expect(oa.chat.completions.create({ model: 'tiny-llama:q0', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
    const answer = await oa.chat.completions.create({ model: 'tiny-llama:q1', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 });
    expect(answer.usage?.completion_tokens).toBe(2);
    expect(lines.some((l) => l.msg === `provider ${providerName(llm.url)}: 1 models from GET ${llm.url}/models (added tiny-llama:q1; gone tiny-llama:q0); all priced at zero (tiny-llama:q1) until SVC_PROVIDERS prices them (docs/inference.md)`)).toBe(true);
  });
});

describe('an upstream that is down at boot', () => {
  it('does not stop the gateway booting: logged, nothing listed, and listed once it answers at a later refresh', async () => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}/v1`;
    const log: Array<{ level: number; msg: string }> = [];
    const g = await startTestGateway({ env: { SVC_PROVIDERS: url }, logger: { level: 'info', stream: { write: (l: string) => void log.push(JSON.parse(l)) } } });
    let late: LlamaServer | undefined;
    try {
      expect((await g.client.models()).data).toEqual([]);
      expect(log.filter((l) => l.level === 40).map((l) => l.msg)).toEqual([`provider ${providerName(url)}: GET ${url}/models failed (ECONNREFUSED); none of its models are listed; asking again every 60 s`]);
      // Still down at the next refresh: not logged again.
      g.clock.advance(60_000);
      await g.gw.services.inference.catalog.discovery.tick();
      expect(log.filter((l) => l.level === 40)).toHaveLength(1);

      late = await startLlamaServer({ modelName: 'late:1', port });
      await g.gw.services.inference.catalog.discovery.tick(); // not due: asked a moment ago
      expect((await g.client.models()).data).toEqual([]);
      g.clock.advance(60_000);
      await g.gw.services.inference.catalog.discovery.tick();
      expect((await g.client.models()).data.map((m) => m.id)).toEqual(['late:1']);
    } finally {
      await g.close();
      await late?.close();
    }
  });
});

describe('the JSON form', () => {
  it('keeps a fixed list working, and prices what a discovering provider lists with its own entries', async () => {
    const g = await startTestGateway({
      env: {
        SVC_PROVIDERS: JSON.stringify([
          { name: 'fixed', base_url: 'http://127.0.0.1:9/v1', models: [{ id: 'fixed-model', input_micro_usd_per_mtok: 5, output_micro_usd_per_mtok: 7 }] },
          { name: 'local', base_url: llm.url, discover: true, models: [{ id: 'tiny-llama:q1', input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 3_000_000 }, { id: 'not-upstream', input_micro_usd_per_mtok: 1 }] },
        ]),
      },
    });
    try {
      expect((await g.client.models()).data.map((m) => [m.id, m.owned_by, m.pricing])).toEqual([
        ['fixed-model', 'fixed', { input_micro_usd_per_mtok: 5, output_micro_usd_per_mtok: 7 }],
        ['tiny-llama:q1', 'local', { input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 3_000_000 }],
      ]);
    } finally {
      await g.close();
    }
  });
});
