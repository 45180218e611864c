import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, words, type TestUpstream } from './support/upstream.ts';
import { until } from './support/agent.ts';
import { account, batchEnv, chatLine, discounted, drain, embedLine, readLines, sdk, uploadLines, verified } from './support/batches.ts';

/**
 * /v1/batches with the official `openai` client against a real upstream on loopback, billing enforced.
 * Every line goes through the metered inference service: held, settled, receipted; the deployment
 * discount is 25%. Batches run on the leader's loop, driven here with runAllOnce; 2 lines start per pass.
 */
const PCT = 25;
const FUND = 10_000_000;
let up: TestUpstream;
let t: TestGateway;
let signer: string;

beforeAll(async () => {
  up = await startUpstream();
  t = await startTestGateway({ env: batchEnv(up.url, { SVC_BATCH_DISCOUNT_PERCENT: String(PCT), SVC_BATCH_LINES_PER_TICK: '2', SVC_BATCH_CONCURRENCY: '2' }) });
  signer = t.gw.services.signer.address;
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});
beforeEach(() => up.reset());

const REPLY_TOKENS = () => words(up.switches.reply).length;
/** Upstream usage of chatLine(id): 1 message + its 2 words in; the reply's words out. */
const lineList = () => 3 * 2 + REPLY_TOKENS() * 5;
const position = (id: string) => t.gw.services.metering.position(id);
const fileRow = (id: string) => t.gw.database.db.selectFrom('files').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const asked = (content: string) => up.requests.filter((r) => r.body.messages?.[0]?.content === content).length;

describe('a batch end to end (openai SDK)', () => {
  it('runs each line through the metered service: OpenAI output and error files, receipts per line, the discount charged, the input destroyed', async () => {
    const a = await account(t, FUND);
    const input = await uploadLines(a.oa, [chatLine('a'), chatLine('b'), chatLine('d', 'question d', 'no-such-model'), chatLine('c')]);
    const created = await a.oa.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { project: 'demo' } });
    expect(created).toMatchObject({ object: 'batch', status: 'validating', input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h', request_counts: { total: 4, completed: 0, failed: 0 }, output_file_id: null, error_file_id: null, metadata: { project: 'demo' } });
    expect(created.id).toMatch(/^batch_/);
    expect(created.expires_at).toBe(created.created_at + 24 * 3600);
    // The input cannot be deleted while its batch runs.
    await expect(a.oa.files.delete(input.id)).rejects.toMatchObject({ status: 409 });

    await t.gw.leader.runAllOnce();
    const mid = await a.oa.batches.retrieve(created.id);
    expect(mid).toMatchObject({ status: 'in_progress', request_counts: { total: 4, completed: 2, failed: 0 } });
    expect(mid.in_progress_at).toEqual(expect.any(Number));

    const done = await drain(t, a.oa, created.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 3, failed: 1 } });
    expect(done.completed_at).toEqual(expect.any(Number));
    expect(done.finalizing_at).toEqual(expect.any(Number));

    const out = await readLines(a.oa, done.output_file_id);
    expect(out.map((l) => l.custom_id)).toEqual(['a', 'b', 'c']);
    const cost = discounted(lineList(), PCT);
    for (const l of out) {
      expect(l.id).toBe(`batch_${l.response!.request_id}`);
      expect(l.error).toBeNull();
      expect(l.response).toMatchObject({ status_code: 200, request_id: expect.stringMatching(/^req_/), body: { object: 'chat.completion', choices: [{ message: { content: up.switches.reply } }] } });
      const p = verified(l, signer);
      expect(p).toMatchObject({ cost_micro_usd: cost, route: 'POST /v1/chat/completions', units: { input_tokens: 3, output_tokens: REPLY_TOKENS() }, detail: { discount_percent: PCT, list_cost_micro_usd: lineList(), stream: false } });
    }
    const errors = await readLines(a.oa, done.error_file_id);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ custom_id: 'd', error: null, receipt: null, response: { status_code: 404, body: { error: { type: 'not_found', param: 'model' } } } });

    // Billed exactly the three answered lines; nothing left held; one receipt and usage event each.
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND - 3 * cost, held_micro_usd: 0 });
    const receipts = await t.gw.database.db.selectFrom('receipts').select('id').where('account_id', '=', a.accountId).execute();
    expect(receipts.map((r) => r.id).sort()).toEqual(out.map((l) => l.response!.request_id).sort());
    expect(['a', 'b', 'c'].map((c) => asked(`question ${c}`))).toEqual([1, 1, 1]);
    expect(asked('question d')).toBe(0);

    // The input's content is gone with the batch; the outputs are files of their own.
    await expect(a.oa.files.content(input.id)).rejects.toMatchObject({ status: 410, type: 'gone', error: expect.objectContaining({ reason: 'batch_ended' }) });
    expect(await fileRow(input.id)).toMatchObject({ content: null, content_chunks: null, content_destroyed_reason: 'batch_ended' });
    expect(await t.gw.database.db.selectFrom('batch_lines').select('line').where('batch_id', '=', done.id).execute()).toEqual([]); // answers now only in the files
    const outputs = (await a.oa.files.list({ purpose: 'batch_output' })).data;
    expect(outputs.map((f) => f.id).sort()).toEqual([done.output_file_id, done.error_file_id].sort());
    expect(await a.oa.files.retrieve(input.id)).toMatchObject({ status_details: expect.stringMatching(/its batch ended/) });

    // The discount is for batches only: a live call pays the list price.
    const live = await a.oa.chat.completions.create({ model: 'test-chat', messages: [{ role: 'user', content: 'question x' }] }).withResponse();
    expect(live.response.headers.get('x-svc-cost-micro-usd')).toBe(String(lineList()));
  });

  it('runs embeddings lines the same way', async () => {
    const a = await account(t, FUND);
    const input = await uploadLines(a.oa, [embedLine('e1', 'one two three'), embedLine('e2', 'four five')]);
    const b = await a.oa.batches.create({ input_file_id: input.id, endpoint: '/v1/embeddings', completion_window: '24h' });
    const done = await drain(t, a.oa, b.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 }, error_file_id: null });
    const out = await readLines(a.oa, done.output_file_id);
    expect(out.map((l) => [l.custom_id, l.response!.body.data[0].embedding.length, verified(l, signer).cost_micro_usd])).toEqual([
      ['e1', 8, discounted(3, PCT)],
      ['e2', 8, discounted(2, PCT)],
    ]);
  });
});

describe('creating a batch', () => {
  it('refuses bad input with a 4xx naming the field, and records nothing', async () => {
    const a = await account(t, FUND);
    const chat = await uploadLines(a.oa, [chatLine('a')]);
    const create = (body: Record<string, unknown>, oa = a.oa) => oa.batches.create({ input_file_id: chat.id, endpoint: '/v1/chat/completions', completion_window: '24h', ...body } as never);
    await expect(create({ endpoint: '/v1/embeddings' })).rejects.toMatchObject({ status: 400, param: 'input_file_id', message: expect.stringMatching(/lines for \/v1\/chat\/completions/) });
    await expect(create({ endpoint: '/v1/responses' })).rejects.toMatchObject({ status: 400, param: 'endpoint' });
    await expect(create({ completion_window: '48h' })).rejects.toMatchObject({ status: 400, param: 'completion_window' });
    await expect(create({ input_file_id: 'file-nope' })).rejects.toMatchObject({ status: 404, param: 'input_file_id' });
    await expect(create({ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) })).rejects.toMatchObject({ status: 400, param: 'metadata' });
    await expect(create({ extra: true })).rejects.toMatchObject({ status: 400, param: 'extra', message: expect.stringContaining('body.extra') });
    // A NUL character, which the database cannot store, anywhere: a 400 naming where, never a 500.
    await expect(create({ metadata: { k: 'v\u0000' } })).rejects.toMatchObject({ status: 400, param: 'metadata.k', message: expect.stringContaining('NUL') });
    await expect(create({ input_file_id: 'file-\u0000' })).rejects.toMatchObject({ status: 400, param: 'input_file_id' });
    await expect(a.oa.batches.retrieve('batch_\u0000x')).rejects.toMatchObject({ status: 400, param: 'id' });
    await expect(a.oa.batches.list({ after: 'batch_\u0000x' })).rejects.toMatchObject({ status: 400, param: 'after' });
    await expect(a.oa.files.retrieve('file-\u0000x')).rejects.toMatchObject({ status: 400, param: 'id' });
    // custom_ids come back in the output file as they went in: none the database or UTF-8 would change.
    await expect(uploadLines(a.oa, [chatLine('ok'), chatLine('b\u0000')])).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/line 2: custom_id/) });
    await expect(uploadLines(a.oa, [chatLine('x\ud800')])).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/line 1: custom_id/) });
    const other = await account(t, FUND);
    const theirs = await uploadLines(other.oa, [chatLine('z')]);
    await expect(create({ input_file_id: theirs.id })).rejects.toMatchObject({ status: 404, param: 'input_file_id' });
    const filesOnly = await account(t, FUND, ['files']);
    const mine = await uploadLines(filesOnly.oa, [chatLine('y')]);
    await expect(create({ input_file_id: mine.id }, filesOnly.oa)).rejects.toMatchObject({ status: 403, type: 'insufficient_scope' });
    expect((await a.oa.batches.list()).data).toEqual([]);
    expect((await fileRow(chat.id)).batch_id).toBeNull();

    // A file feeds one batch; an output file feeds none.
    const first = await create({});
    await expect(create({})).rejects.toMatchObject({ status: 409, message: expect.stringMatching(/already fed/) });
    const done = await drain(t, a.oa, first.id);
    await expect(create({ input_file_id: done.output_file_id })).rejects.toMatchObject({ status: 400, param: 'input_file_id', message: expect.stringMatching(/purpose batch_output/) });
  });

  it('lists newest first with has_more and after as OpenAI; the SDK pages through; other accounts see nothing', async () => {
    const a = await account(t, FUND);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.unshift((await a.oa.batches.create({ input_file_id: (await uploadLines(a.oa, [chatLine(`p${i}`)])).id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    const page = await a.oa.batches.list({ limit: 2 });
    expect(page.data.map((b) => b.id)).toEqual(ids.slice(0, 2));
    expect(page.has_more).toBe(true);
    const next = await a.oa.batches.list({ limit: 2, after: ids[1] });
    expect(next.data.map((b) => b.id)).toEqual(ids.slice(2, 4));
    const all: string[] = [];
    for await (const b of a.oa.batches.list({ limit: 2 })) all.push(b.id);
    expect(all).toEqual(ids);
    const whole = await a.oa.batches.list();
    expect({ has_more: whole.has_more, n: whole.data.length }).toEqual({ has_more: false, n: 5 });
    await expect(a.oa.batches.list({ limit: 101 })).rejects.toMatchObject({ status: 400, param: 'limit' });
    const other = await account(t, FUND);
    expect((await other.oa.batches.list()).data).toEqual([]);
    await expect(other.oa.batches.list({ after: ids[0] })).rejects.toMatchObject({ status: 400, type: 'invalid_cursor' });
    await expect(other.oa.batches.retrieve(ids[0]!)).rejects.toMatchObject({ status: 404 });
    await expect(other.oa.batches.cancel(ids[0]!)).rejects.toMatchObject({ status: 404 });
    for (const id of ids) await a.oa.batches.cancel(id);
    await t.gw.leader.runAllOnce();
  });
});

describe('ending early', () => {
  it('cancel: lines already run stay billed and in the output file; the rest are reported unrun; cancelling then cancelled', async () => {
    const a = await account(t, FUND);
    const input = await uploadLines(a.oa, ['a', 'b', 'c', 'd', 'e'].map((c) => chatLine(`k${c}`)));
    const b = await a.oa.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await t.gw.leader.runAllOnce();
    const cancelling = await a.oa.batches.cancel(b.id);
    expect(cancelling).toMatchObject({ status: 'cancelling', request_counts: { completed: 2 } });
    expect(cancelling.cancelling_at).toEqual(expect.any(Number));
    expect((await a.oa.batches.cancel(b.id)).status).toBe('cancelling');
    await t.gw.leader.runAllOnce();
    const done = await a.oa.batches.retrieve(b.id);
    expect(done).toMatchObject({ status: 'cancelled', request_counts: { total: 5, completed: 2, failed: 0 } });
    expect((await readLines(a.oa, done.output_file_id)).map((l) => [l.custom_id, l.response!.status_code])).toEqual([['ka', 200], ['kb', 200]]);
    const unrun = await readLines(a.oa, done.error_file_id);
    expect(unrun.map((l) => [l.custom_id, l.error!.code, l.response, l.receipt])).toEqual(['kc', 'kd', 'ke'].map((c) => [c, 'batch_cancelled', null, null]));
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: FUND - 2 * discounted(lineList(), PCT), held_micro_usd: 0 });
    expect(['a', 'b', 'c', 'd', 'e'].map((c) => asked(`question k${c}`))).toEqual([1, 1, 0, 0, 0]);
    expect(await fileRow(input.id)).toMatchObject({ content: null, content_chunks: null, content_destroyed_reason: 'batch_ended' });
    expect((await a.oa.batches.cancel(b.id)).status).toBe('cancelled');
    const other = await uploadLines(a.oa, [chatLine('q')]);
    const completed = await drain(t, a.oa, (await a.oa.batches.create({ input_file_id: other.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    await expect(a.oa.batches.cancel(completed.id)).rejects.toMatchObject({ status: 409, type: 'conflict' });
  });

  it('a revoked key fails the remaining lines with its error; a frozen one with circuit_breaker_tripped', async () => {
    for (const how of ['revoke', 'freeze'] as const) {
      const a = await account(t, FUND);
      const reader = sdk(t, (await a.session.createKey()).key);
      const b = await a.oa.batches.create({ input_file_id: (await uploadLines(a.oa, ['1', '2', '3', '4'].map((c) => chatLine(`${how}${c}`)))).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      await t.gw.leader.runAllOnce();
      if (how === 'revoke') await a.session.revokeKey(a.keyId);
      else await t.gw.services.keys.freeze(a.keyId, 'test');
      const done = await drain(t, reader, b.id);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 2, failed: 2 } });
      const failed = await readLines(reader, done.error_file_id);
      const want = how === 'revoke' ? { status_code: 401, type: 'invalid_credential' } : { status_code: 402, type: 'circuit_breaker_tripped' };
      expect(failed.map((l) => [l.custom_id, l.response!.status_code, l.response!.body.error.type, l.receipt])).toEqual([`${how}3`, `${how}4`].map((c) => [c, want.status_code, want.type, null]));
    }
  });

  it('lines that do not fit the credit fail with 402 and are not charged', async () => {
    const a = await account(t, 0);
    const b = await a.oa.batches.create({ input_file_id: (await uploadLines(a.oa, [chatLine('poor1'), chatLine('poor2')])).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await drain(t, a.oa, b.id);
    expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 0, failed: 2 }, output_file_id: null });
    const failed = await readLines(a.oa, done.error_file_id);
    expect(failed.map((l) => [l.response!.status_code, l.response!.body.error.type])).toEqual([[402, 'insufficient_credit'], [402, 'insufficient_credit']]);
    expect(await position(a.accountId)).toMatchObject({ balance_micro_usd: 0, held_micro_usd: 0 });
    expect(asked('question poor1')).toBe(0);
  });

  it("past its window (24 h, or the input's TTL if sooner) a batch expires: lines run stay billed, the rest are reported batch_expired", async () => {
    const a = await account(t, FUND);
    const input = await uploadLines(a.oa, ['1', '2', '3'].map((c) => chatLine(`x${c}`)));
    const b = await a.oa.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    await t.gw.leader.runAllOnce();
    t.clock.advance(24 * 3600 * 1000);
    await t.gw.leader.runAllOnce();
    const done = await a.oa.batches.retrieve(b.id);
    expect(done).toMatchObject({ status: 'expired', request_counts: { total: 3, completed: 2, failed: 0 } });
    expect(done.expired_at).toEqual(expect.any(Number));
    expect((await readLines(a.oa, done.output_file_id)).map((l) => l.custom_id)).toEqual(['x1', 'x2']);
    expect((await readLines(a.oa, done.error_file_id)).map((l) => [l.custom_id, l.error!.code])).toEqual([['x3', 'batch_expired']]);
    expect(await fileRow(input.id)).toMatchObject({ content: null, content_chunks: null, content_destroyed_reason: 'batch_ended' });
    // A batch whose input's hard TTL (7 days) ends inside its window expires with the input.
    const late = await uploadLines(a.oa, [chatLine('late1'), chatLine('late2'), chatLine('late3')]);
    t.clock.advance((7 * 24 - 12) * 3600 * 1000);
    const short = await a.oa.batches.create({ input_file_id: late.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(short.expires_at).toBe(late.expires_at! - 60);
    await t.gw.leader.runAllOnce();
    t.clock.advance(12 * 3600 * 1000 - 30_000); // past the batch's end, inside the input's TTL
    await t.gw.leader.runAllOnce();
    const ended = await a.oa.batches.retrieve(short.id);
    expect(ended).toMatchObject({ status: 'expired', request_counts: { total: 3, completed: 2, failed: 0 } });
    expect((await readLines(a.oa, ended.error_file_id)).map((l) => [l.custom_id, l.error!.code])).toEqual([['late3', 'batch_expired']]);
  });
});

describe('a control-plane restart', () => {
  async function pair(extra: Record<string, string> = {}) {
    const env = batchEnv(up.url, { SVC_BATCH_LINES_PER_TICK: '2', SVC_BATCH_CONCURRENCY: '1', ...extra });
    const first = await startTestGateway({ persistent: true, env });
    return { first, env, second: () => startTestGateway({ share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, clock: first.clock, env }) };
  }
  const receiptsOf = (g: TestGateway, accountId: string) => g.gw.database.db.selectFrom('receipts').select('id').where('account_id', '=', accountId).execute();

  it('resumes where it stopped: no line lost, none charged twice, crash states settled from the database', async () => {
    const { first, second } = await pair();
    let next: TestGateway | undefined;
    try {
      const a = await account(first, FUND);
      const b = await a.oa.batches.create({ input_file_id: (await uploadLines(a.oa, ['1', '2', '3', '4', '5'].map((c) => chatLine(`r${c}`)))).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      await first.gw.leader.runAllOnce(); // lines 1 and 2
      const db = first.gw.database.db;
      // Crash after the charge of line 2, before its row was finished: answer stored, receipt written.
      await db.updateTable('batch_lines').set({ status: 'running', ended_at: null }).where('batch_id', '=', b.id).where('line', '=', 2).execute();
      await db.updateTable('batches').set((eb) => ({ completed: eb('completed', '-', 1) })).where('id', '=', b.id).execute();
      // Crash right after claiming line 3: a request id, no hold, no receipt.
      await db.insertInto('batch_lines').values({ batch_id: b.id, line: 3, custom_id: 'r3', request_id: 'req_crashedbeforecall0', status: 'running', status_code: null, output: null, claimed_at: first.clock.now(), ended_at: null }).execute();
      await first.stop();

      next = await second();
      const oa = sdk(next, a.key);
      await next.gw.leader.runAllOnce(); // line 2 finished from the database, 4 and 5 run, 3 waits out the lease
      expect(await oa.batches.retrieve(b.id)).toMatchObject({ status: 'in_progress', request_counts: { completed: 4 } });
      expect(asked('question r3')).toBe(0);
      next.clock.advance(900 * 1000 + 1); // the hold TTL
      const done = await drain(next, oa, b.id);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: 5, completed: 5, failed: 0 } });
      const out = await readLines(oa, done.output_file_id);
      expect(out.map((l) => l.custom_id)).toEqual(['r1', 'r2', 'r3', 'r4', 'r5']);
      expect(out[2]!.response!.request_id).toBe('req_crashedbeforecall0');
      for (const l of out) verified(l, next.gw.services.signer.address);
      expect(['1', '2', '3', '4', '5'].map((c) => asked(`question r${c}`))).toEqual([1, 1, 1, 1, 1]);
      expect((await receiptsOf(next, a.accountId)).map((r) => r.id).sort()).toEqual(out.map((l) => l.response!.request_id).sort());
      expect(await next.gw.services.metering.position(a.accountId)).toMatchObject({ balance_micro_usd: FUND - 5 * lineList(), held_micro_usd: 0 });
    } finally {
      await next?.stop();
      await first.close();
    }
  });

  it('a line in flight when the process stops is given back uncharged and runs once after the restart', async () => {
    const { first, second } = await pair();
    let next: TestGateway | undefined;
    try {
      const a = await account(first, FUND);
      const b = await a.oa.batches.create({ input_file_id: (await uploadLines(a.oa, [chatLine('f1'), chatLine('f2')])).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      let release!: () => void;
      up.switches.holdUntil = new Promise<void>((r) => (release = r));
      const pass = first.gw.leader.runAllOnce();
      await until('line f1 reaches the upstream', async () => asked('question f1') === 1);
      await first.stop(); // aborts the call: the hold is released and the line given back
      await pass;
      await until('the upstream sees the abort', async () => up.requests.find((r) => r.body.messages?.[0]?.content === 'question f1')!.aborted);
      release();
      up.switches.holdUntil = null;

      next = await second();
      const oa = sdk(next, a.key);
      // Given back: no claim row, nothing held, nothing charged.
      expect(await next.gw.database.db.selectFrom('batch_lines').select('line').where('batch_id', '=', b.id).execute()).toEqual([]);
      expect(await next.gw.services.metering.position(a.accountId)).toMatchObject({ balance_micro_usd: FUND, held_micro_usd: 0 });
      const done = await drain(next, oa, b.id);
      expect(done).toMatchObject({ status: 'completed', request_counts: { total: 2, completed: 2, failed: 0 } });
      expect([asked('question f1'), asked('question f2')]).toEqual([2, 1]);
      expect((await readLines(oa, done.output_file_id)).map((l) => l.custom_id)).toEqual(['f1', 'f2']);
      expect(await receiptsOf(next, a.accountId)).toHaveLength(2);
      expect(await next.gw.services.metering.position(a.accountId)).toMatchObject({ balance_micro_usd: FUND - 2 * lineList(), held_micro_usd: 0 });
    } finally {
      await next?.stop();
      await first.close();
    }
  });
});

describe('many batches', () => {
  it("one account's many batches hold up neither another's start nor its cancel; an unreadable input never keeps a cancel from ending", async () => {
    const t2 = await startTestGateway({ env: batchEnv(up.url, { SVC_BATCH_LINES_PER_TICK: '1', SVC_BATCH_CONCURRENCY: '1', SVC_BATCH_BATCHES_PER_TICK: '2' }) });
    try {
      const create = async (oa: OpenAI, ids: string[]) => oa.batches.create({ input_file_id: (await uploadLines(oa, ids.map((id) => chatLine(id)))).id, endpoint: '/v1/chat/completions', completion_window: '24h' });
      const busy = await account(t2, FUND);
      const theirs = [];
      for (let i = 0; i < 3; i++) theirs.push(await create(busy.oa, [`m${i}a`, `m${i}b`, `m${i}c`]));
      const other = await account(t2, FUND);
      const mine = await create(other.oa, ['o1', 'o2']);
      const cancelled = await create(other.oa, ['p1', 'p2']);
      await other.oa.batches.cancel(cancelled.id);
      await t2.gw.leader.runAllOnce();
      // Two batches a pass, in turn across accounts: the busy account's oldest and the other's.
      expect(asked('question o1')).toBe(1);
      expect((await other.oa.batches.retrieve(cancelled.id)).status).toBe('cancelled');
      expect(['m0a', 'm1a', 'm2a'].map((c) => asked(`question ${c}`))).toEqual([1, 0, 0]);

      // An input that can no longer be opened: passes fail on it until it is cancelled, then it ends.
      await t2.gw.database.db.updateTable('files').set({ content: Buffer.from('not sealed') }).where('batch_id', '=', theirs[2]!.id).execute();
      await busy.oa.batches.cancel(theirs[2]!.id);
      await t2.gw.leader.runAllOnce();
      expect((await busy.oa.batches.retrieve(theirs[2]!.id)).status).toBe('cancelled');
    } finally {
      await t2.close();
    }
  });

  it('keeps the inputs of many running batches parsed between passes: a pass does not read them again', async () => {
    const t3 = await startTestGateway({ env: batchEnv(up.url, { SVC_BATCH_LINES_PER_TICK: '1', SVC_BATCH_CONCURRENCY: '1' }) });
    try {
      const a = await account(t3, FUND);
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await a.oa.batches.create({ input_file_id: (await uploadLines(a.oa, [`r${i}a`, `r${i}b`].map((c) => chatLine(c)))).id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
      await t3.gw.leader.runAllOnce();
      // The stored inputs are emptied: only what the runner kept can run the second lines.
      const inputs = await t3.gw.database.db.updateTable('files').set({ content: null, content_chunks: null }).where('batch_id', 'in', ids).returning('id').execute();
      await t3.gw.database.db.deleteFrom('file_chunks').where('owner_id', 'in', inputs.map((f) => f.id)).execute();
      await t3.gw.leader.runAllOnce();
      expect(Array.from({ length: 6 }, (_, i) => asked(`question r${i}b`))).toEqual([1, 1, 1, 1, 1, 1]);
    } finally {
      await t3.close();
    }
  });
});
