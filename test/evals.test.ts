import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { verifyMessage } from 'ethers';
import type { SvcClient } from '@svc/shared/client';
import { ENFORCED_BILLING, freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';
import { call } from './support/call.ts';

/**
 * Eval suites and drift monitors end to end, against a local OpenAI-compatible server whose answers the test
 * scripts: every assertion type (llm_rubric graded by a second model of that server, json_schema checked by
 * Ajv), metered case calls with signed receipts, repeat=N with pass@N and pass^N, the regression flag, a drift
 * monitor on the leader's loop with the injected clock whose drop fires a signed eval_drift_detected webhook
 * (verified with the standardwebhooks package), a monitor due during a long leader outage running once, and
 * refusals of bad input that write nothing.
 */

const IN = 2_000_000; // micro-USD per million input tokens: 2 per token
const OUT = 5_000_000;

let t: TestGateway;
let up: ScriptedUpstream;
/** What the chat model answers, by the last user message; the test changes it. */
let answers: Record<string, string> = {};
/** Calls per prompt, for answers that change from one attempt to the next. */
const calls = new Map<string, number>();
/** The output bound each grader call asked for. */
const graderAsked: Array<{ model: string; max_tokens: unknown }> = [];
/** Prompts whose answer waits until the test releases it. */
const held = new Map<string, { waiting: boolean; release: () => void }>();

function completion(model: string, content: string) {
  return { id: 'cmpl-1', object: 'chat.completion', created: 1, model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 } };
}

/** Grades like a strict examiner: full marks when the answer names Paris, none otherwise. */
function grade(body: any): string {
  const user = String(body.messages.at(-1).content);
  const answer = user.slice(user.indexOf('Answer to grade:'));
  if (user.includes('UNREADABLE')) return 'I would rather not say.';
  return JSON.stringify(/paris/i.test(answer) ? { score: 0.9, reason: 'names Paris' } : { score: 0.1, reason: 'does not name Paris' });
}

class Receiver {
  hits: Array<{ headers: Record<string, string>; body: string }> = [];
  private server: Server | undefined;
  constructor(readonly port: number) {}
  get url() {
    return `http://127.0.0.1:${this.port}/hooks/evals`;
  }
  async open(): Promise<void> {
    const flat = (h: IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.hits.push({ headers: flat(req.headers), body: Buffer.concat(chunks).toString('utf8') });
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', r));
  }
  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
let receiver: Receiver;

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = async (_req, body, res) => {
    const prompt = String(body.messages?.at(-1)?.content ?? '');
    let content: string;
    if (body.model === 'test-grader' || body.model === 'test-grader-small') {
      graderAsked.push({ model: body.model, max_tokens: body.max_tokens });
      content = grade(body);
    }
    else {
      const n = (calls.get(prompt) ?? 0) + 1;
      calls.set(prompt, n);
      if (prompt === 'Flip a coin') content = n % 3 === 1 ? 'heads' : 'tails'; // heads once in three
      else content = answers[prompt] ?? 'I do not know.';
      const gate = held.get(prompt);
      if (gate) {
        await new Promise<void>((r) => {
          gate.release = r;
          gate.waiting = true;
        });
      }
    }
    if (prompt === 'FAIL_UPSTREAM') return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"boom"}}');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(body.model, content)));
  };
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_SESSION_TTL_SECONDS: String(10 * 365 * 86400), // sessions outlive the hours the clock moves through
      SVC_INFERENCE_TIMEOUT_SECONDS: '5',
      SVC_PROVIDERS: JSON.stringify([
        {
          name: 'local',
          base_url: up.url,
          models: [
            { id: 'test-chat', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 1000 },
            { id: 'test-grader', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 1000 },
            { id: 'test-grader-small', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 200 },
            { id: 'test-embed', input_micro_usd_per_mtok: IN, embedding: true },
          ],
        },
      ]),
    },
  });
  receiver = new Receiver(await freePort());
  await receiver.open();
});
afterAll(async () => {
  await receiver?.close();
  await t?.close();
  await up?.close();
});

/** A signed-in account with credit and an inference key. */
async function account(credit = 50_000_000) {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, credit, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['inference'] });
  return { ...s, keyId: key.id };
}
type Account = Awaited<ReturnType<typeof account>>;

const PARIS = { name: 'capital', messages: [{ role: 'user', content: 'What is the capital of {{country}}?' }], variables: { country: 'France' } };

async function createSuite(c: SvcClient, body: Record<string, unknown>) {
  const r = await call(c, 'POST', '/v1/evals', body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; cases: any[]; key_id: string | null };
}
async function run(c: SvcClient, id: string, body: Record<string, unknown> = {}, repeat?: number) {
  const r = await c.raw('POST', `/v1/evals/${id}/run`, { body, query: { repeat } });
  const parsed = await r.json();
  expect(r.status, JSON.stringify(parsed)).toBe(200);
  return parsed as any;
}
const assertionOf = (runBody: any, c: number, a: number, attempt = 0) => runBody.results[c].attempts[attempt].assertions[a];

describe('eval suites', () => {
  it('scores every assertion type, each case call metered and receipted under the key', async () => {
    answers = {
      'What is the capital of France?': 'Paris',
      'Reply in JSON': '```json\n{"city": "Paris", "population": 2100000}\n```',
      'Reply in bad JSON': '{"city": "Paris", population: }',
    };
    const a = await account();
    const suite = await createSuite(a.client, {
      name: 'geography',
      model: 'test-chat',
      key_id: a.keyId,
      grader_model: 'test-grader',
      max_tokens: 50,
      cases: [
        {
          ...PARIS,
          assertions: [
            { type: 'equals', value: ' Paris ' },
            { type: 'equals', value: 'paris' },
            { type: 'contains', value: 'Par' },
            { type: 'contains', value: 'par' },
            { type: 'icontains', value: 'PARIS' },
            { type: 'icontains', value: 'london' },
            { type: 'regex', value: '^P\\w{4}$' },
            { type: 'regex', value: '^p', flags: 'i' },
            { type: 'regex', value: '^Lyon' },
            { type: 'latency_ms_below', value: 60_000 },
            { type: 'cost_below', value: 1_000_000 },
            { type: 'cost_below', value: 1 },
            { type: 'llm_rubric', value: 'Names the capital of {{country}}.' },
            { type: 'llm_rubric', value: 'Names the capital.', threshold: 0.95, weight: 0 },
            { type: 'is_json', weight: 0 },
          ],
          threshold: 0.5,
        },
        {
          name: 'json',
          messages: [{ role: 'user', content: 'Reply in JSON' }],
          assertions: [
            { type: 'is_json' },
            { type: 'json_schema', value: { type: 'object', required: ['city', 'population'], properties: { city: { type: 'string', pattern: '^[A-Z][a-z]+$' }, population: { type: 'integer', minimum: 0 } } } },
            { type: 'json_schema', value: { type: 'object', required: ['mayor'] }, weight: 0 },
          ],
        },
        {
          name: 'bad json',
          messages: [{ role: 'user', content: 'Reply in bad JSON' }],
          assertions: [{ type: 'is_json' }, { type: 'json_schema', value: { type: 'object' } }],
        },
        { name: 'upstream fails', messages: [{ role: 'user', content: 'FAIL_UPSTREAM' }], assertions: [{ type: 'contains', value: 'x' }] },
        { name: 'grader out of format', messages: [{ role: 'user', content: 'What is the capital of France?' }], assertions: [{ type: 'llm_rubric', value: 'UNREADABLE' }] },
      ],
    });
    expect(suite.cases[0].assertions[0].weight).toBe(1); // defaults filled in
    const r = await run(a.client, suite.id);

    const c0 = r.results[0].attempts[0];
    expect(c0.output).toBe('Paris');
    expect(c0.assertions.map((x: any) => [x.type, x.passed])).toEqual([
      ['equals', true], ['equals', false], ['contains', true], ['contains', false], ['icontains', true], ['icontains', false],
      ['regex', true], ['regex', true], ['regex', false], ['latency_ms_below', true], ['cost_below', true], ['cost_below', false],
      ['llm_rubric', true], ['llm_rubric', false], ['is_json', false],
    ]);
    const rubric = assertionOf(r, 0, 12);
    expect(rubric).toMatchObject({ score: 0.9, threshold: 0.5, grader_reason: 'names Paris', grader: { model: 'test-grader', receipt_id: expect.stringMatching(/^req_/) } });
    expect(assertionOf(r, 0, 13)).toMatchObject({ score: 0.9, threshold: 0.95, passed: false, weight: 0 });
    // The grader was shown the rubric with the case's variable filled in.
    expect(up.seen.some((s) => s.body.model === 'test-grader' && String(s.body.messages[1].content).includes('Names the capital of France.'))).toBe(true);
    // 8 of the 13 counted assertions pass: 0.615 >= the case threshold 0.5.
    expect(c0.score).toBeCloseTo(8 / 13, 9);
    expect(r.results[0].passed).toBe(true);

    expect(r.results[1].attempts[0].assertions.map((x: any) => x.passed)).toEqual([true, true, false]);
    expect(r.results[1].passed).toBe(true);
    expect(r.results[2].attempts[0].assertions.map((x: any) => [x.passed, x.reason])).toEqual([[false, 'the answer is not JSON'], [false, 'the answer is not JSON']]);
    expect(r.results[3].attempts[0]).toMatchObject({ passed: false, receipt_id: null, error: { type: 'upstream_error' }, assertions: [] });
    expect(r.results[4].attempts[0].assertions[0]).toMatchObject({ passed: false, score: 0, reason: expect.stringContaining('the grader gave no grade: the grader did not answer with a JSON object') });
    expect(r).toMatchObject({ object: 'eval_run', trigger: 'manual', key_id: a.keyId, cases: 5, attempts: 5, passed_attempts: 2, pass_rate: 0.4, regression: false, previous_run_id: null });

    // Each case call is a metered chat completion of the key: its receipt is signed by the published signer and charged.
    const pub = (await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string };
    const receipt = await call(a.client, 'GET', `/v1/receipts/${c0.receipt_id}`);
    expect(receipt.status).toBe(200);
    const payload = JSON.parse(receipt.body.canonical ?? JSON.stringify(receipt.body.payload));
    expect(payload).toMatchObject({ kind: 'inference', key_id: a.keyId, model: 'test-chat', route: 'POST /v1/evals/:id/run', cost_micro_usd: 10 * 2 + 4 * 5 });
    if (receipt.body.canonical) expect(verifyMessage(receipt.body.canonical, receipt.body.signature).toLowerCase()).toBe(pub.address.toLowerCase());
    expect(c0.cost_micro_usd).toBe(40 + 2 * 40); // the case call and its two graders
    // Four case calls answered (the failed one charged nothing) and three grader calls, 40 each.
    expect(r.cost_micro_usd).toBe(4 * 40 + 3 * 40);

    // The stored run is content-free: no output, no grader reasoning.
    const runs = await call(a.client, 'GET', `/v1/evals/${suite.id}/runs`);
    expect(runs.body.runs).toHaveLength(1);
    expect(JSON.stringify(runs.body)).not.toContain('Paris');
    expect(JSON.stringify(runs.body)).not.toContain('names Paris');
    expect(runs.body.runs[0]).toMatchObject({ id: r.id, pass_rate: 0.4, results: [{ attempts: [{ receipt_id: c0.receipt_id }] }, {}, {}, {}, {}] });
    const list = await call(a.client, 'GET', '/v1/evals');
    expect(list.body.evals).toHaveLength(1);
    expect(list.body.evals[0]).toMatchObject({ id: suite.id, case_count: 5, last_run: { id: r.id, pass_rate: 0.4 } });
  });

  it('measures latency on the gateway clock: an answer held while the clock moves 5 s fails latency_ms_below 1000', async () => {
    const a = await account();
    const prompt = 'Answer slowly';
    answers[prompt] = 'done';
    const gate = { waiting: false, release: () => undefined };
    held.set(prompt, gate);
    const suite = await createSuite(a.client, { name: 'latency', model: 'test-chat', key_id: a.keyId, cases: [{ messages: [{ role: 'user', content: prompt }], assertions: [{ type: 'latency_ms_below', value: 1000 }, { type: 'contains', value: 'done' }] }] });
    const pending = run(a.client, suite.id);
    await expect.poll(() => gate.waiting).toBe(true);
    t.clock.advance(5000);
    held.delete(prompt);
    gate.release();
    const r = await pending;
    expect(r.results[0].attempts[0]).toMatchObject({ latency_ms: 5000, passed: false, assertions: [{ passed: false, reason: 'the answer took 5000 ms' }, { passed: true }] });
  });

  it('runs each case N times with ?repeat=N, without caching, and reports pass@N and pass^N', async () => {
    answers['What is the capital of France?'] = 'Paris';
    answers['What is 2+2?'] = 'five';
    const a = await account();
    const suite = await createSuite(a.client, {
      name: 'repeat',
      model: 'test-chat',
      key_id: a.keyId,
      cases: [
        { ...PARIS, assertions: [{ type: 'equals', value: 'Paris' }] },
        { messages: [{ role: 'user', content: 'Flip a coin' }], assertions: [{ type: 'equals', value: 'heads' }] },
        { messages: [{ role: 'user', content: 'What is 2+2?' }], assertions: [{ type: 'contains', value: '4' }] },
      ],
    });
    calls.delete('Flip a coin');
    const before = up.seen.length;
    const r = await run(a.client, suite.id, {}, 3);
    expect(up.seen.length - before).toBe(9); // 3 cases x 3 attempts, each a call of its own
    expect(r.results.map((c: any) => c.attempts.map((x: any) => x.passed))).toEqual([[true, true, true], expect.arrayContaining([true, false, false]), [false, false, false]]);
    expect(r).toMatchObject({ repeat: 3, attempts: 9, passed_attempts: 4 });
    expect(r.pass_rate).toBeCloseTo(4 / 9, 9);
    expect(r.pass_at_n).toBeCloseTo(2 / 3, 9);
    expect(r.pass_hat_n).toBeCloseTo(1 / 3, 9);
    // The 95% Wilson lower bound of 4 in 9, computed here from its formula.
    const z = 1.96, n = 9, p = 4 / 9;
    expect(r.wilson_lower).toBeCloseTo((p + (z * z) / (2 * n) - z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n))) / (1 + (z * z) / n), 9);
    expect(new Set(r.results.flatMap((c: any) => c.attempts.map((x: any) => x.receipt_id))).size).toBe(9);
    for (const bad of [0, 11, 'x']) expect((await a.client.raw('POST', `/v1/evals/${suite.id}/run`, { body: {}, query: { repeat: bad } })).status, String(bad)).toBe(400);
  });

  it('flags a regression against the previous run: a lower pass rate or a case that passed and now fails', async () => {
    answers['What is the capital of France?'] = 'Paris';
    answers['What is 2+2?'] = '4';
    const a = await account();
    const suite = await createSuite(a.client, {
      name: 'regression',
      model: 'test-chat',
      cases: [
        { ...PARIS, assertions: [{ type: 'contains', value: 'Paris' }] },
        { messages: [{ role: 'user', content: 'What is 2+2?' }], assertions: [{ type: 'contains', value: '4' }] },
      ],
    });
    // No designated key: the run names one.
    const noKey = await call(a.client, 'POST', `/v1/evals/${suite.id}/run`, {});
    expect(noKey.status).toBe(400);
    expect(noKey.body.error.param).toBe('key_id');
    const first = await run(a.client, suite.id, { key_id: a.keyId });
    expect(first).toMatchObject({ pass_rate: 1, regression: false, previous_run_id: null });
    answers['What is 2+2?'] = 'five';
    const second = await run(a.client, suite.id, { key_id: a.keyId });
    expect(second).toMatchObject({ pass_rate: 0.5, regression: true, regressed_cases: [1], previous_run_id: first.id, previous_pass_rate: 1 });
    const third = await run(a.client, suite.id, { key_id: a.keyId });
    expect(third).toMatchObject({ pass_rate: 0.5, regression: false, regressed_cases: [], previous_run_id: second.id });
    // Another case now fails while the rate holds: still a regression.
    answers['What is 2+2?'] = '4';
    answers['What is the capital of France?'] = 'Lyon';
    const fourth = await run(a.client, suite.id, { key_id: a.keyId });
    expect(fourth).toMatchObject({ pass_rate: 0.5, regression: true, regressed_cases: [0] });
    const history = await call(a.client, 'GET', `/v1/evals/${suite.id}/runs`);
    expect(history.body.runs.map((x: any) => x.id)).toEqual([fourth.id, third.id, second.id, first.id]);
    answers['What is the capital of France?'] = 'Paris';
  });

  it("runs with no body at all under the suite's key; a grader whose model produces fewer than 400 tokens is asked within its bound", async () => {
    answers['What is the capital of France?'] = 'Paris';
    const a = await account();
    const suite = await createSuite(a.client, {
      name: 'small grader',
      model: 'test-chat',
      key_id: a.keyId,
      grader_model: 'test-grader-small',
      cases: [{ ...PARIS, assertions: [{ type: 'llm_rubric', value: 'Names the capital of {{country}}.' }] }],
    });
    const r = await fetch(`${t.url}/v1/evals/${suite.id}/run`, { method: 'POST', headers: { authorization: `Bearer ${a.token}` } });
    const body = (await r.json()) as any;
    expect(r.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ key_id: a.keyId, pass_rate: 1 });
    expect(assertionOf(body, 0, 0)).toMatchObject({ type: 'llm_rubric', passed: true, grader: { model: 'test-grader-small' } });
    expect(graderAsked.filter((g) => g.model === 'test-grader-small')).toEqual([{ model: 'test-grader-small', max_tokens: 200 }]);
    expect(graderAsked.filter((g) => g.model === 'test-grader').every((g) => g.max_tokens === 400)).toBe(true);
  });

  it('refuses bad input with a 4xx naming the field, and writes nothing', async () => {
    const a = await account();
    const other = await account();
    const good = { name: 'x', model: 'test-chat', cases: [{ ...PARIS, assertions: [{ type: 'contains', value: 'Paris' }] }] };
    const bad: Array<[string, Record<string, unknown>, string]> = [
      ['no cases', { ...good, cases: [] }, 'cases'],
      ['unknown assertion type', { ...good, cases: [{ ...PARIS, assertions: [{ type: 'sounds_right', value: 'x' }] }] }, 'cases[0].assertions[0].type'],
      ['schema that does not compile', { ...good, cases: [{ ...PARIS, assertions: [{ type: 'json_schema', value: { type: 'objekt' } }] }] }, 'cases[0].assertions[0].value'],
      ['unknown schema keyword', { ...good, cases: [{ ...PARIS, assertions: [{ type: 'json_schema', value: { type: 'object', requird: ['a'] } }] }] }, 'cases[0].assertions[0].value'],
      ['pattern RE2 refuses', { ...good, cases: [{ ...PARIS, assertions: [{ type: 'regex', value: '(a)\\1' }] }] }, 'cases[0].assertions[0].value'],
      ['undefined variable', { ...good, cases: [{ messages: [{ role: 'user', content: 'Hi {{who}}' }], assertions: [{ type: 'contains', value: 'x' }] }] }, 'cases[0].messages[0].content'],
      ['only weight-0 assertions', { ...good, cases: [{ ...PARIS, assertions: [{ type: 'contains', value: 'x', weight: 0 }] }] }, 'cases[0].assertions'],
      ['unknown model', { ...good, model: 'no-such-model' }, 'model'],
      ['embeddings model', { ...good, model: 'test-embed' }, 'model'],
      ['unknown grader', { ...good, cases: [{ ...PARIS, assertions: [{ type: 'llm_rubric', value: 'x', grader_model: 'nope' }] }] }, 'cases[0].assertions[0].grader_model'],
      ["another account's key", { ...good, key_id: other.keyId }, 'key_id'],
      ['unknown field', { ...good, owner: 'me' }, 'owner'],
    ];
    for (const [what, body, param] of bad) {
      const r = await call(a.client, 'POST', '/v1/evals', body);
      expect(r.status, what).toBe(400);
      expect(r.body.error, what).toMatchObject({ type: 'invalid_request', param });
      expect(r.body.error.message, what).toContain(param);
    }
    const types = await call(a.client, 'POST', '/v1/evals', bad[1]![1]);
    expect(types.body.error.message).toContain('llm_rubric');
    expect((await call(a.client, 'GET', '/v1/evals')).body.evals).toEqual([]);

    // A key without the inference scope cannot run calls.
    const proofsOnly = await a.client.createKey({ scopes: ['proofs'] });
    expect((await call(a.client, 'POST', '/v1/evals', { ...good, key_id: proofsOnly.id })).body.error).toMatchObject({ param: 'key_id', message: expect.stringContaining('inference') });

    // Monitors: interval under an hour, another account's suite, bad tolerance; nothing written.
    const suite = await createSuite(a.client, { ...good, key_id: a.keyId });
    const mon = [
      [{ eval_id: suite.id, interval_seconds: 3599 }, 400, 'interval_seconds'],
      [{ eval_id: suite.id, drop_tolerance: 1.5 }, 400, 'drop_tolerance'],
      [{ eval_id: suite.id, repeat: 0 }, 400, 'repeat'],
    ] as const;
    for (const [body, status, param] of mon) {
      const r = await call(a.client, 'POST', '/v1/evals/monitors', body);
      expect(r.status, param).toBe(status);
      expect(r.body.error.param, param).toBe(param);
    }
    const foreign = await call(other.client, 'POST', '/v1/evals/monitors', { eval_id: suite.id, key_id: other.keyId });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error).toMatchObject({ type: 'not_found', param: 'eval_id' });
    expect((await call(a.client, 'GET', '/v1/evals/monitors')).body.monitors).toEqual([]);
    expect((await call(other.client, 'GET', '/v1/evals/monitors')).body.monitors).toEqual([]);
    // Another account's suite is not found for any route.
    for (const [m, p] of [['POST', `/v1/evals/${suite.id}/run`], ['GET', `/v1/evals/${suite.id}/runs`], ['DELETE', `/v1/evals/${suite.id}`]] as const) {
      expect((await call(other.client, m, p, m === 'POST' ? { key_id: other.keyId } : undefined)).status, `${m} ${p}`).toBe(404);
    }
    // A run whose key the account revoked: 400 naming the suite's key, nothing recorded.
    await a.client.raw('DELETE', `/v1/keys/${a.keyId}`);
    const revoked = await call(a.client, 'POST', `/v1/evals/${suite.id}/run`, {});
    expect(revoked.status).toBe(400);
    expect(revoked.body.error.param).toBe('eval.key_id');
    expect((await call(a.client, 'GET', `/v1/evals/${suite.id}/runs`)).body.runs).toEqual([]);
    // /v1/evals/monitors is never a suite id.
    expect((await call(a.client, 'DELETE', '/v1/evals/monitors')).status).toBe(404);
  });

  it("holds case calls to the key's policy as its requests are: an email in the input redacted before the upstream sees it", async () => {
    const a = await account();
    const rules = await call(a.client, 'POST', '/v1/guardrails', { detectors: [{ type: 'pii', input: 'redact' }] });
    expect(rules.status, JSON.stringify(rules.body)).toBe(201);
    const k = await call(a.client, 'POST', '/v1/keys', { scopes: ['inference'], policy: { guardrails: [rules.body.id] } });
    expect(k.status, JSON.stringify(k.body)).toBe(201);
    const suite = await createSuite(a.client, { name: 'pii', model: 'test-chat', key_id: k.body.id, cases: [{ messages: [{ role: 'user', content: 'Write to alice@example.com today' }], assertions: [{ type: 'contains', value: 'know' }] }] });
    const r = await run(a.client, suite.id);
    const sent = String(up.seen.at(-1)!.body.messages[0].content);
    expect(sent).toContain('Write to');
    expect(sent).not.toContain('alice@example.com');
    const receipt = await call(a.client, 'GET', `/v1/receipts/${r.results[0].attempts[0].receipt_id}`);
    expect(JSON.parse(receipt.body.canonical)).toMatchObject({ policy: { id: k.body.policy_id }, guardrails: { findings: [expect.objectContaining({ category: 'email', decision: 'redacted' })] } });
  });

  it('stops a run on a refusal of the key (402 out of credit): nothing recorded, nothing charged for unanswered cases', async () => {
    const a = await account(100); // enough for two calls of 40
    const suite = await createSuite(a.client, { name: 'poor', model: 'test-chat', key_id: a.keyId, max_tokens: 4, cases: Array.from({ length: 6 }, () => ({ ...PARIS, assertions: [{ type: 'contains', value: 'Paris' }] })) });
    const r = await call(a.client, 'POST', `/v1/evals/${suite.id}/run`, {});
    expect(r.status).toBe(402);
    expect(r.body.error.type).toBe('insufficient_credit');
    expect((await call(a.client, 'GET', `/v1/evals/${suite.id}/runs`)).body.runs).toEqual([]);
  });
});

/** standardwebhooks checks the timestamp against the wall clock; the gateway's is the test's ManualClock. */
function verifyHook(secret: string, hit: { headers: Record<string, string>; body: string }, at: Date): any {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
  try {
    return new Webhook(secret).verify(hit.body, hit.headers);
  } finally {
    vi.useRealTimers();
  }
}

describe('drift monitors', () => {
  let a: Account;
  let suite: { id: string };
  let monitor: any;
  const HOUR = 3600_000;
  const monitorRuns = async () => ((await call(a.client, 'GET', `/v1/evals/${suite.id}/runs`)).body.runs as any[]).filter((r) => r.trigger === 'monitor');
  const current = async () => ((await call(a.client, 'GET', '/v1/evals/monitors')).body.monitors as any[]).find((m) => m.id === monitor.id);

  beforeAll(async () => {
    answers['What is the capital of France?'] = 'Paris';
    answers['What is 2+2?'] = '4';
    answers['Name a colour'] = 'blue';
    a = await account();
    suite = await createSuite(a.client, {
      name: 'drift',
      model: 'test-chat',
      key_id: a.keyId,
      cases: [
        { ...PARIS, assertions: [{ type: 'contains', value: 'Paris' }] },
        { messages: [{ role: 'user', content: 'What is 2+2?' }], assertions: [{ type: 'contains', value: '4' }] },
        { messages: [{ role: 'user', content: 'Name a colour' }], assertions: [{ type: 'icontains', value: 'blue' }] },
      ],
    });
  });

  it('a suite that passes, then drops after the upstream changes: the next scheduled run fires a signed eval_drift_detected', async () => {
    const hook = await call(a.client, 'POST', '/v1/webhooks', { url: receiver.url, events: ['eval_drift_detected'] });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const manual = await run(a.client, suite.id);
    expect(manual.pass_rate).toBe(1);

    const created = await call(a.client, 'POST', '/v1/evals/monitors', { eval_id: suite.id, drop_tolerance: 0.2, threshold: 0.5 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    monitor = created.body;
    const createdAt = t.clock.now().getTime();
    expect(monitor).toMatchObject({ object: 'eval_monitor', state: 'active', interval_seconds: 3600, key_id: a.keyId, measure: 'pass_rate', baseline_rate: 1, baseline_run_id: manual.id, failure_streak: 0, drifting: false, last_run_id: null });
    expect(Date.parse(monitor.next_run_at)).toBe(createdAt + HOUR);

    // Not due yet: nothing runs.
    await t.gw.leader.runAllOnce();
    expect(await monitorRuns()).toEqual([]);

    // The upstream changes; the next scheduled run drops from 1 to 1/3.
    answers['What is 2+2?'] = 'five';
    answers['Name a colour'] = 'I prefer not to say';
    t.clock.advance(HOUR + 1000);
    await t.gw.leader.runAllOnce();
    const runs = await monitorRuns();
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ monitor_id: monitor.id, regression: true, regressed_cases: [1, 2] });
    expect(runs[0].pass_rate).toBeCloseTo(1 / 3, 9);
    const m = await current();
    expect(m).toMatchObject({ failure_streak: 1, drifting: true, last_run_id: runs[0].id, baseline_rate: 1, last_error: null });
    expect(m.last_pass_rate).toBeCloseTo(1 / 3, 9);
    expect(Date.parse(m.next_run_at)).toBe(t.clock.now().getTime() + HOUR);

    // The outbox delivers it on the next pass, signed (Standard Webhooks).
    await t.gw.leader.runAllOnce();
    expect(receiver.hits).toHaveLength(1);
    const event = verifyHook(hook.body.secret, receiver.hits[0]!, t.clock.now());
    expect(event).toMatchObject({ type: 'eval_drift_detected', account_id: a.accountId, data: { monitor_id: monitor.id, eval_id: suite.id, run_id: runs[0].id, measure: 'pass_rate', baseline_rate: 1, threshold: 0.5, drop_tolerance: 0.2, reasons: ['below_threshold', 'dropped'], failure_streak: 1, regressed_cases: [1, 2] } });
    expect(event.data.measured_rate).toBeCloseTo(1 / 3, 9);
    expect(() => new Webhook(Buffer.from('another secret of 24 bytes!').toString('base64')).verify(receiver.hits[0]!.body, receiver.hits[0]!.headers)).toThrow();

    // Still drifting on the next run: the streak grows, no second event (once per drift).
    t.clock.advance(HOUR);
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect((await current()).failure_streak).toBe(2);
    expect(receiver.hits).toHaveLength(1);

    // Back within bounds: the streak ends and the monitor re-arms.
    answers['What is 2+2?'] = '4';
    answers['Name a colour'] = 'blue';
    t.clock.advance(HOUR);
    await t.gw.leader.runAllOnce();
    expect(await current()).toMatchObject({ failure_streak: 0, drifting: false, last_pass_rate: 1 });
  });

  it('a monitor due during a long leader outage runs once, not once per missed interval', async () => {
    const before = (await monitorRuns()).length;
    t.clock.advance(30 * HOUR); // thirty intervals with no leader
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect((await monitorRuns()).length).toBe(before + 1);
    const m = await current();
    expect(Date.parse(m.next_run_at)).toBe(t.clock.now().getTime() + HOUR);
    t.clock.advance(HOUR - 1);
    await t.gw.leader.runAllOnce();
    expect((await monitorRuns()).length).toBe(before + 1);
  });

  it('pauses, resumes, changes interval, threshold and drop tolerance; runs with repeat measure the Wilson lower bound; DELETE leaves the suite', async () => {
    const paused = await call(a.client, 'PATCH', `/v1/evals/monitors/${monitor.id}`, { paused: true });
    expect(paused.body).toMatchObject({ state: 'paused', next_run_at: null });
    const runsBefore = (await monitorRuns()).length;
    t.clock.advance(5 * HOUR);
    await t.gw.leader.runAllOnce();
    expect((await monitorRuns()).length).toBe(runsBefore);

    const changed = await call(a.client, 'PATCH', `/v1/evals/monitors/${monitor.id}`, { paused: false, interval_seconds: 7200, threshold: 0.9, drop_tolerance: 0.05 });
    expect(changed.body).toMatchObject({ state: 'active', interval_seconds: 7200, threshold: 0.9, drop_tolerance: 0.05 });
    expect(Date.parse(changed.body.next_run_at)).toBe(t.clock.now().getTime()); // overdue while paused: due now, once
    expect((await call(a.client, 'PATCH', `/v1/evals/monitors/${monitor.id}`, { interval_seconds: 1800 })).body.error).toMatchObject({ param: 'interval_seconds' });
    expect((await call(a.client, 'PATCH', `/v1/evals/monitors/${monitor.id}`, {})).status).toBe(400);
    await t.gw.leader.runAllOnce();
    expect((await monitorRuns()).length).toBe(runsBefore + 1);
    expect(Date.parse((await current()).next_run_at)).toBe(t.clock.now().getTime() + 2 * HOUR);

    // A monitor that runs each case three times measures the Wilson lower bound: 9 of 9 passing is about 0.70.
    const wilson = await call(a.client, 'POST', '/v1/evals/monitors', { eval_id: suite.id, repeat: 3, threshold: 0.6 });
    expect(wilson.body).toMatchObject({ measure: 'wilson_lower', baseline_rate: null });
    t.clock.advance(HOUR);
    await t.gw.leader.runAllOnce();
    const w = ((await call(a.client, 'GET', '/v1/evals/monitors')).body.monitors as any[]).find((m) => m.id === wilson.body.id);
    expect(w.last_pass_rate).toBe(1);
    expect(w.last_measured_rate).toBeCloseTo(0.7008, 3);
    expect(w).toMatchObject({ drifting: false, failure_streak: 0 });
    expect(w.baseline_rate).toBe(w.last_measured_rate);

    const gone = await call(a.client, 'DELETE', `/v1/evals/monitors/${monitor.id}`);
    expect(gone.body).toEqual({ id: monitor.id, object: 'eval_monitor', deleted: true });
    expect((await call(a.client, 'DELETE', `/v1/evals/monitors/${monitor.id}`)).status).toBe(404);
    expect(((await call(a.client, 'GET', '/v1/evals')).body.evals as any[]).map((e) => e.id)).toContain(suite.id);
    // Deleting the suite takes its remaining monitor with it.
    const del = await call(a.client, 'DELETE', `/v1/evals/${suite.id}`);
    expect(del.body).toEqual({ id: suite.id, object: 'eval', deleted: true, monitors_deleted: 1 });
    expect((await call(a.client, 'GET', '/v1/evals/monitors')).body.monitors).toEqual([]);
  });

  it('a monitor whose key was revoked records the error and its streak, and fires nothing', async () => {
    const b = await account();
    const s = await createSuite(b.client, { name: 'revoked', model: 'test-chat', key_id: b.keyId, cases: [{ ...PARIS, assertions: [{ type: 'contains', value: 'Paris' }] }] });
    const m = (await call(b.client, 'POST', '/v1/evals/monitors', { eval_id: s.id })).body;
    await b.client.raw('DELETE', `/v1/keys/${b.keyId}`);
    t.clock.advance(HOUR);
    await t.gw.leader.runAllOnce();
    const after = ((await call(b.client, 'GET', '/v1/evals/monitors')).body.monitors as any[]).find((x) => x.id === m.id);
    expect(after).toMatchObject({ failure_streak: 1, drifting: false, last_run_id: null, last_error: expect.stringContaining('revoked') });
  });
});
