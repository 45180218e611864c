import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { canonicalize } from '@svc/shared';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * The public arena end to end: suites declared in the deployment's configuration are listed with the
 * canonical serialization their tasks_sha256 covers; nothing runs and the leaderboard is empty until a runner
 * key is configured; then the leader's loop runs every (suite, model) through the metered path under the
 * runner's key, each task receipted and shared, once per cadence (a long outage catches up once); each
 * leaderboard row is backed by a run whose receipts are fetched through the shared-receipt route and verify
 * with ethers against the published signer.
 */

let up: ScriptedUpstream;
let first: TestGateway & { databaseUrl: string | undefined; dataDir: string };
let t: TestGateway;
let runner: Awaited<ReturnType<TestGateway['signIn']>>;
let runnerKeyId: string;

const ANSWERS: Record<string, Record<string, string>> = {
  sharp: { 'Capital of France?': 'Paris.', 'Capital of Japan?': 'Tokyo.', 'Reply with JSON {"ok": true}': '{"ok": true}' },
  dull: { 'Capital of France?': 'Paris, I think.', 'Capital of Japan?': 'Kyoto.', 'Reply with JSON {"ok": true}': 'ok: true' },
};
const SUITES = [
  {
    slug: 'basics',
    name: 'Basics',
    description: 'Capitals and JSON',
    cadence_seconds: 86_400,
    models: ['sharp', 'dull'],
    max_tokens: 20,
    temperature: 0,
    tasks: [
      { id: 'fr', messages: [{ role: 'user', content: 'Capital of France?' }], assertions: [{ type: 'contains', value: 'Paris' }] },
      { id: 'jp', messages: [{ role: 'user', content: 'Capital of Japan?' }], assertions: [{ type: 'regex', value: '^tokyo', flags: 'i' }] },
      { id: 'json', messages: [{ role: 'user', content: 'Reply with JSON {"ok": true}' }], assertions: [{ type: 'json_schema', value: { type: 'object', required: ['ok'] } }] },
    ],
  },
];
const env = (extra: Record<string, string> = {}) => ({
  SVC_BILLING_ENFORCED: 'true',
  SVC_TREASURY_ADDRESS: '0x1111111111111111111111111111111111111111',
  SVC_USDT_CONTRACT: '0x2222222222222222222222222222222222222222',
  SVC_PROVIDERS: JSON.stringify([
    {
      name: 'local',
      base_url: up.url,
      models: [
        { id: 'sharp', input_micro_usd_per_mtok: 3_000_000, output_micro_usd_per_mtok: 6_000_000, max_output_tokens: 100 },
        { id: 'dull', input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 2_000_000, max_output_tokens: 100 },
      ],
    },
  ]),
  SVC_ARENA_SUITES: JSON.stringify(SUITES),
  ...extra,
});
const get = async <T = any>(path: string) => {
  const res = await fetch(`${t.url}${path}`);
  return { status: res.status, body: (await res.json()) as T };
};
const runs = async () => Number((await t.gw.database.db.selectFrom('arena_runs').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = (_req, body, res) => {
    const prompt = String(body.messages.at(-1).content);
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content: ANSWERS[body.model]?.[prompt] ?? '?' }, finish_reason: 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } }),
    );
  };
  first = await startTestGateway({ persistent: true, env: env() });
  t = first;
});
afterAll(async () => {
  await t?.close();
  await first?.close();
  await up?.close();
});

describe('arena', () => {
  it('lists the declared suites with the canonical serialization of their tasks; empty leaderboard without a runner', async () => {
    const list = await get('/v1/arena/suites');
    expect(list).toEqual({ status: 200, body: [{ slug: 'basics', name: 'Basics', description: 'Capitals and JSON', cadence_seconds: 86_400, models: ['sharp', 'dull'], task_count: 3, tasks_sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }] });
    const one = (await get('/v1/arena/suites/basics')).body;
    expect(one.tasks).toEqual(SUITES[0]!.tasks);
    expect(one.canonical).toBe(canonicalize(SUITES[0]!.tasks));
    expect(one.tasks_sha256).toBe(createHash('sha256').update(one.canonical).digest('hex'));
    expect(one.tasks_sha256).toBe(list.body[0].tasks_sha256);
    expect((await get('/v1/arena/suites/nope')).status).toBe(404);
    expect((await get('/v1/arena/runs/arun_nope')).status).toBe(404);

    await t.gw.leader.runAllOnce();
    expect(await runs()).toBe(0);
    expect(up.seen).toEqual([]);
    expect((await get('/v1/arena/leaderboard')).body).toMatchObject({ rows: [], runner_configured: false });

    // The operator funds a runner account, mints its key and restarts the gateway with it.
    runner = await t.signIn();
    await t.gw.services.metering.credit(runner.accountId, 10_000_000, 'grant', 'arena-runner');
    runnerKeyId = (await runner.client.request<{ id: string }>('POST', '/v1/keys', { body: { scopes: ['inference'] } })).id;
    await first.stop();
    t = await startTestGateway({ share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, clock: first.clock, env: env({ SVC_ARENA_RUNNER_KEY_ID: runnerKeyId }) });
  });

  it('runs every (suite, model) under the runner key; each leaderboard row is backed by a run whose receipts verify with ethers', async () => {
    await t.gw.leader.runAllOnce();
    expect(await runs()).toBe(2);
    expect(up.seen).toHaveLength(6);
    for (const s of up.seen) expect(s.body).toMatchObject({ max_tokens: 20, temperature: 0 });
    const board = (await get('/v1/arena/leaderboard')).body;
    expect(board.runner_configured).toBe(true);
    expect(board.rows.map((r: any) => [r.suite, r.model, r.tasks_passed, r.tasks_total])).toEqual([
      ['basics', 'sharp', 3, 3],
      ['basics', 'dull', 1, 3],
    ]);
    const { address } = (await get<{ address: string }>('/v1/receipts/pubkey')).body;
    expect(address).toBe(t.gw.services.signer.address);
    for (const row of board.rows) {
      const run = (await get(`/v1/arena/runs/${row.run_id}`)).body;
      expect(run).toMatchObject({ id: row.run_id, suite: 'basics', model: row.model, state: 'completed', receipted: true, current_tasks: true, tasks_sha256: row.tasks_sha256 });
      expect(run.tasks.map((x: any) => x.task_id)).toEqual(['fr', 'jp', 'json']);
      for (const task of run.tasks) {
        const shared = await get(`/v1/receipts/shared/${task.receipt_id}`);
        expect(shared.status).toBe(200);
        expect(verifyMessage(shared.body.canonical, shared.body.signature)).toBe(address);
        expect(JSON.parse(shared.body.canonical)).toMatchObject({ id: task.receipt_id, model: row.model, account_id: runner.accountId, key_id: runnerKeyId, route: 'arena run' });
        expect(shared.body.canonical).not.toContain('Capital');
      }
      expect(run.cost_micro_usd).toBe(row.cost_micro_usd);
      expect(run.cost_micro_usd).toBeGreaterThan(0);
    }
    const dull = (await get(`/v1/arena/runs/${board.rows[1].run_id}`)).body;
    expect(dull.tasks.map((x: any) => x.passed)).toEqual([true, false, false]);
    // The runs were charged to the runner account.
    expect((await t.client.withCredential({ kind: 'session', token: runner.token }).request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance')).balance_micro_usd).toBe(10_000_000 - board.rows.reduce((n: number, r: any) => n + r.cost_micro_usd, 0));
  });

  it('runs again once per cadence: not before it elapsed, once after a long outage', async () => {
    await t.gw.leader.runAllOnce();
    expect(await runs()).toBe(2);
    t.clock.advance(86_400_000 * 5); // five cadences pass with no leader
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect(await runs()).toBe(4);
    const board = (await get('/v1/arena/leaderboard')).body;
    const latest = await t.gw.database.db.selectFrom('arena_runs').select(['id', 'model']).orderBy('seq', 'desc').limit(2).execute();
    expect(board.rows.map((r: any) => r.run_id).sort()).toEqual(latest.map((r) => r.id).sort());
  });
});
