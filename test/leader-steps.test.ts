import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import type { LeaderStep, StepFault } from '../control-plane/src/jobs/faults.ts';
import { ANCHOR_KIND } from '../control-plane/src/modules/legacy/limits.ts';
import { call } from './support/call.ts';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * Leader work across the death of its process: each test has a leader die between two steps of a loop (a
 * fault injected at that point stands for kill -9 there: nothing after it runs, the process then stops), then
 * the next process on the same database leads. Nothing the dead leader took is lost, and nothing it started
 * runs twice: a scheduled agent run is queued once, a drift monitor's run and an arena run cut off mid-way are
 * recorded as interrupted (never run again before their time), a legacy plan's move and its anchor commit
 * together. On Postgres the next process is another replica that sees the dead one's connection gone.
 */

const HOUR = 3600_000;
const SUITE = {
  slug: 'steps',
  name: 'Steps',
  cadence_seconds: 86_400,
  models: ['test-chat'],
  tasks: [
    { id: 'fr', messages: [{ role: 'user', content: 'Capital of France?' }], assertions: [{ type: 'contains', value: 'Paris' }] },
    { id: 'it', messages: [{ role: 'user', content: 'Capital of Italy?' }], assertions: [{ type: 'contains', value: 'Rome' }] },
  ],
};

let up: ScriptedUpstream;
const env = (extra: Record<string, string> = {}) => ({
  ...ENFORCED_BILLING,
  SVC_SESSION_TTL_SECONDS: String(10 * 365 * 86400), // sessions outlive the days the clock moves through
  SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: 'test-chat', input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000, max_output_tokens: 100 }] }]),
  SVC_ARENA_SUITES: JSON.stringify([SUITE]),
  ...extra,
});

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = (_req, body, res) => {
    const prompt = String(body.messages?.at(-1)?.content ?? '');
    const content = prompt.includes('Italy') ? 'Rome' : 'Paris';
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: body.model, choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } }),
    );
  };
});
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
  await up?.close();
});

/** A fault that kills the leader at `step` (the first time it is reached): the step throws, and nothing after it runs. */
function dieAt(step: LeaderStep): StepFault & { hit: string[] } {
  const hit: string[] = [];
  return Object.assign(
    (s: LeaderStep, ref: string) => {
      if (s !== step || hit.length > 0) return;
      hit.push(ref);
      throw new Error(`the process died at ${step}`);
    },
    { hit },
  );
}

/** The leader that dies (`fault`) and, once it stopped, the next process on its database: `next()`. */
async function leaders(fault: StepFault, extra: Record<string, string> = {}) {
  const first = await startTestGateway({ persistent: true, env: env(extra), stepFault: fault });
  let next: TestGateway | undefined;
  cleanups.push(async () => {
    await next?.stop();
    await first.close();
  });
  return {
    first,
    async next(more: Record<string, string> = {}) {
      await first.stop(); // the dead leader's process is gone: its connections close, its lock is free
      next = await startTestGateway({ share: { databaseUrl: first.databaseUrl, dataDir: first.dataDir }, clock: first.clock, env: env({ ...extra, ...more }) });
      return next;
    },
  };
}

async function funded(t: TestGateway) {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, 50_000_000, 'grant', `grant-${s.accountId}`);
  return { ...s, keyId: (await s.client.createKey({ scopes: ['inference'] })).id };
}

describe('a leader killed between two steps', () => {
  it('agents: a scheduled run taken when the leader dies is queued once, by the next leader', async () => {
    const fault = dieAt('agents.schedule_taken');
    const l = await leaders(fault);
    const owner = await l.first.signIn();
    const created = await call(owner.client, 'POST', '/v1/agents', { name: 'every-minute', language: 'sh', code: 'true', schedule: '* * * * *' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const dueAt = created.body.next_run_at as string;
    l.first.clock.set(new Date(Date.parse(dueAt) + 1000));
    const scheduled = (t: TestGateway) => t.gw.database.db.selectFrom('agent_runs').select(['id', 'status']).where('agent_id', '=', id).where('trigger', '=', 'schedule').execute();
    const nextRun = async (t: TestGateway) => (await t.gw.database.db.selectFrom('agents').select('next_run_at').where('id', '=', id).executeTakeFirstOrThrow()).next_run_at?.toISOString();

    await l.first.gw.leader.runAllOnce();
    expect(fault.hit).toEqual([id]);
    // Nothing of the take committed: the run is still due, nothing queued.
    expect(await scheduled(l.first)).toEqual([]);
    expect(await nextRun(l.first)).toBe(new Date(dueAt).toISOString());

    const t = await l.next();
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect(await scheduled(t)).toHaveLength(1);
    expect(Date.parse((await nextRun(t))!)).toBeGreaterThan(t.clock.now().getTime());
  });

  it('drift monitors: a run claimed when the leader dies is recorded as interrupted, once, and not run again before its next time', async () => {
    const fault = dieAt('evals.monitor_claimed');
    const l = await leaders(fault);
    const a = await funded(l.first);
    const suite = await call(a.client, 'POST', '/v1/evals', { name: 'capitals', model: 'test-chat', key_id: a.keyId, cases: [{ messages: [{ role: 'user', content: 'Capital of France?' }], assertions: [{ type: 'contains', value: 'Paris' }] }] });
    expect(suite.status, JSON.stringify(suite.body)).toBe(201);
    const monitor = await call(a.client, 'POST', '/v1/evals/monitors', { eval_id: suite.body.id, threshold: 0.5 });
    expect(monitor.status, JSON.stringify(monitor.body)).toBe(201);
    l.first.clock.advance(HOUR + 1000);
    const claimedAt = l.first.clock.now().toISOString();
    await l.first.gw.leader.runAllOnce();
    expect(fault.hit).toEqual([monitor.body.id]);
    const calls = up.seen.length;

    const t = await l.next();
    const c = new SvcClient({ baseUrl: t.url, credential: { kind: 'session', token: a.token } });
    const view = async () => ((await call(c, 'GET', '/v1/evals/monitors')).body.monitors as any[])[0];
    const monitorRuns = async () => ((await call(c, 'GET', `/v1/evals/${suite.body.id}/runs`)).body.runs as any[]).filter((r) => r.trigger === 'monitor');
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect(await view()).toMatchObject({ last_error: expect.stringMatching(/^interrupted: /), last_run_at: claimedAt, failure_streak: 1, last_run_id: null });
    expect(await monitorRuns()).toEqual([]);
    expect(up.seen.length).toBe(calls); // not run again by the next leader

    // At its next time it runs as usual.
    t.clock.advance(HOUR);
    await t.gw.leader.runAllOnce();
    expect(await monitorRuns()).toHaveLength(1);
    expect(await view()).toMatchObject({ last_error: null, failure_streak: 0, last_pass_rate: 1 });
  });

  it('arena: a run cut off after a task is recorded failed (interrupted) with that task and its receipt; the pair is not run again before its cadence', async () => {
    // The runner key exists before the gateway that runs the arena boots with it.
    const setup = await startTestGateway({ persistent: true, env: env() });
    const runner = await funded(setup);
    await setup.stop();
    const fault = dieAt('arena.task_done');
    const first = await startTestGateway({ share: { databaseUrl: setup.databaseUrl, dataDir: setup.dataDir }, clock: setup.clock, env: env({ SVC_ARENA_RUNNER_KEY_ID: runner.keyId }), stepFault: fault });
    let t: TestGateway | undefined;
    cleanups.push(async () => {
      await t?.stop();
      await first.stop();
      await setup.close();
    });
    const before = up.seen.length;
    await first.gw.leader.runAllOnce();
    expect(fault.hit).toHaveLength(1);
    expect(up.seen.length).toBe(before + 1); // the first task ran (and was charged), the second never started

    await first.stop();
    t = await startTestGateway({ share: { databaseUrl: setup.databaseUrl, dataDir: setup.dataDir }, clock: setup.clock, env: env({ SVC_ARENA_RUNNER_KEY_ID: runner.keyId }) });
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect(up.seen.length).toBe(before + 1); // not run again
    const rows = await t.gw.database.db.selectFrom('arena_runs').select(['id', 'state']).execute();
    expect(rows).toEqual([{ id: fault.hit[0], state: 'failed' }]);
    const run = (await (await fetch(`${t.url}/v1/arena/runs/${fault.hit[0]}`)).json()) as any;
    expect(run).toMatchObject({ state: 'failed', receipted: false, tasks_total: 2, tasks_passed: 1, error: { type: 'interrupted' } });
    expect(run.tasks).toEqual([expect.objectContaining({ task_id: 'fr', passed: true, receipt_id: expect.stringMatching(/^req_/) })]);
    const usage = await t.gw.database.db.selectFrom('usage_events').select(['request_id', 'cost_micro_usd']).where('account_id', '=', runner.accountId).execute();
    expect(usage).toEqual([{ request_id: run.tasks[0].receipt_id, cost_micro_usd: run.cost_micro_usd }]);

    // After its cadence the pair runs whole.
    t.clock.advance(86_400_000 + 1000);
    await t.gw.leader.runAllOnce();
    expect(up.seen.length).toBe(before + 3);
    const latest = (await (await fetch(`${t.url}/v1/arena/leaderboard`)).json()) as any;
    expect(latest.rows).toEqual([expect.objectContaining({ suite: 'steps', model: 'test-chat', tasks_passed: 2, tasks_total: 2 })]);
  });

  it('legacy plans: a warning whose leader died before it committed is made once by the next leader, its event queued for anchoring with it', async () => {
    const fault = dieAt('legacy.plan_moved');
    const l = await leaders(fault);
    const owner = await l.first.signIn();
    const heir = await l.first.signIn();
    const plan = await call(owner.client, 'POST', '/v1/legacy/plans', { name: 'family', note: 'the keys are in the drawer', checkin_interval_seconds: 3600, grace_seconds: 3600, beneficiaries: [{ wallet: heir.account.address }] });
    expect(plan.status, JSON.stringify(plan.body)).toBe(201);
    const id = plan.body.id as string;
    l.first.clock.advance(HOUR + 1000);
    await l.first.gw.leader.runAllOnce();
    expect(fault.hit).toEqual([id]);

    const t = await l.next();
    const state = async () => {
      const db = t.gw.database.db;
      const p = await db.selectFrom('legacy_plans').select(['status', 'event_count']).where('id', '=', id).executeTakeFirstOrThrow();
      const events = await db.selectFrom('legacy_events').select(['seq', 'type', 'hash']).where('plan_id', '=', id).orderBy('seq').execute();
      const queued = await db.selectFrom('anchor_leaves').select(['ref', 'hash']).where('kind', '=', ANCHOR_KIND).where('ref', 'like', `${id}:%`).orderBy('seq').execute();
      return { status: p.status, events: events.map((e) => e.type), unqueued: events.filter((e) => !queued.some((q) => q.ref === `${id}:${e.seq}` && q.hash === e.hash)).map((e) => e.type) };
    };
    await t.gw.leader.runAllOnce();
    await t.gw.leader.runAllOnce();
    expect(await state()).toEqual({ status: 'warning', events: ['created', 'warning'], unqueued: [] });
  });
});
