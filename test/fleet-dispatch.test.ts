import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { getEventListeners } from 'node:events';
import type { JobFinish } from '@svc/shared';
import { LATENCY_ALPHA } from '../control-plane/src/fleet/registry.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, muteAgent, tcpProxy, until, type TestAgent } from './support/agent.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * The dispatch primitive with real agents: what a node's record learns from each outcome (reliability as a
 * plain share, latency as a moving average), a caller's cancel reaching the node, the control plane's own
 * timeout, and the node-drop rule (reconnect within the grace period carries on; a drop after output fails).
 */
const GRACE_MS = 4000;
let t: TestGateway;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let proxy: Awaited<ReturnType<typeof tcpProxy>>;
const agents: TestAgent[] = [];
beforeAll(async () => {
  t = await startTestGateway({ reconnectGraceMs: GRACE_MS });
  owner = await t.signIn();
  proxy = await tcpProxy(t.url);
});
afterAll(async () => {
  for (const a of agents) await a.kill();
  await proxy?.close();
  await t?.close();
});

type NodeEntry = { id: string; type: string; status?: string; reliability?: number | null; jobs_dispatched?: number; latency_ms?: number | null };
const entry = async (id: string) => (await t.client.request<NodeEntry[]>('GET', '/v1/nodes')).find((n) => n.id === id)!;
const hub = () => t.gw.fleet.hub;
const jobRow = (id: string) => t.gw.database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const jobCount = async () => (await t.gw.database.db.selectFrom('jobs').select('id').execute()).length;

async function startAgent(url = t.url): Promise<TestAgent> {
  const a = await enrollAgent(t, owner.client, { kinds: ['sandbox'] }, { url });
  agents.push(a);
  a.start();
  await until(`${a.nodeId} online`, async () => hub().isConnected(a.nodeId) && (await entry(a.nodeId)).status === 'online');
  return a;
}

/**
 * Runs `dispatch` with the hub's stopwatch (which times each round trip, from the job's send to its finish)
 * replaced by the test's own, moved on by `ms` once the job is sent: the latency sample is exactly `ms`.
 */
async function timed<T>(ms: number, dispatch: (onSent: () => void) => Promise<T>): Promise<T> {
  const stopwatch = hub().stopwatch;
  const real = stopwatch.now;
  let now = 1_000;
  stopwatch.now = () => now;
  try {
    return await dispatch(() => void (now += ms));
  } finally {
    stopwatch.now = real;
  }
}

describe('what a node record learns from real dispatches', () => {
  let a: TestAgent;
  beforeAll(async () => {
    a = await startAgent();
  });

  it('latency_ms is the documented moving average of the round trips; reliability is the plain share', async () => {
    expect(LATENCY_ALPHA).toBe(0.2);
    const recorded = vi.spyOn(t.gw.fleet.registry, 'recordOutcome');
    for (const ms of [30, 400, 120, 250]) await timed(ms, (onSent) => hub().dispatch({ kind: 'diag.wait', payload: { ms: 1 }, timeoutMs: 10_000, nodeId: a.nodeId, onSent }));
    const samples = recorded.mock.calls.map(([nodeId, o]) => {
      expect(nodeId).toBe(a.nodeId);
      expect(o.outcome).toBe('succeeded');
      return o.latencyMs!;
    });
    recorded.mockRestore();
    expect(samples).toEqual([30, 400, 120, 250]);
    // The first sample seeds it; then latency += 0.2 × (sample − latency): 30, 104, 107.2, 135.76. Not the
    // plain mean of the samples (200): the weights matter.
    const e = await entry(a.nodeId);
    expect(e.latency_ms).toBe(136);
    expect(e).toMatchObject({ reliability: 1, jobs_dispatched: 4 });
  });

  it('a failure the agent reports counts against the node: 4 of 5 ended well', async () => {
    const recorded = vi.spyOn(t.gw.fleet.registry, 'recordOutcome');
    await expectApiError(timed(500, (onSent) => hub().dispatch({ kind: 'diag.wait', payload: { ms: 10_000 }, timeoutMs: 200, nodeId: a.nodeId, onSent })), 504, 'upstream_timeout');
    // The agent answered (timed out): a round trip, so a latency sample beside the failed outcome.
    expect(recorded.mock.calls.map(([, o]) => [o.outcome, o.latencyMs])).toEqual([['failed', 500]]);
    recorded.mockRestore();
    expect(await entry(a.nodeId)).toMatchObject({ reliability: 0.8, jobs_dispatched: 5 });
  });

  it("a caller's cancel stops the job on the node, is recorded as canceled, and does not count against the node", async () => {
    const before = await entry(a.nodeId);
    const finishes = vi.spyOn(hub(), 'onFinish');
    const ac = new AbortController();
    let started!: () => void;
    const output = new Promise<void>((r) => (started = r));
    const job = hub().dispatch({ kind: 'diag.wait', payload: { ms: 30_000, say: 'started' }, timeoutMs: 60_000, nodeId: a.nodeId, signal: ac.signal, onOutput: () => started() });
    await output;
    const jobId = hub().openJobs().find((j) => j.nodeId === a.nodeId)!.jobId;
    ac.abort();
    await expectApiError(job, 409, 'conflict');
    expect(await jobRow(jobId)).toMatchObject({ status: 'canceled', error: 'caller went away', node_id: a.nodeId });
    // The agent reports the job stopped: its handler was aborted (a job run to its end would finish ok).
    const report = await until('the node reports the job stopped', async () => finishes.mock.calls.map(([, f]) => f as JobFinish).find((f) => f.job_id === jobId));
    finishes.mockRestore();
    expect(report).toMatchObject({ ok: false, error: 'canceled: caller went away' });
    expect(hub().openJobs()).toEqual([]);
    // Dispatched, but neither for nor against the node; no latency sample.
    expect(await entry(a.nodeId)).toMatchObject({ reliability: before.reliability, jobs_dispatched: before.jobs_dispatched! + 1, latency_ms: before.latency_ms });
    const row = await t.gw.database.db.selectFrom('nodes').select(['succeeded', 'failed']).where('id', '=', a.nodeId).executeTakeFirstOrThrow();
    expect(row).toEqual({ succeeded: 4, failed: 1 });
  });

  it('a signal shared by many jobs (a batch) keeps no listener of the jobs that ended', async () => {
    const shared = new AbortController();
    for (let i = 0; i < 3; i++) await hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 10_000, nodeId: a.nodeId, signal: shared.signal });
    await expectApiError(hub().dispatch({ kind: 'diag.wait', payload: { ms: 10_000 }, timeoutMs: 200, nodeId: a.nodeId, signal: shared.signal }), 504, 'upstream_timeout');
    expect(getEventListeners(shared.signal, 'abort')).toHaveLength(0);
  });
});

describe('the control plane times out a job its node never answers', () => {
  it('fails it upstream_timeout, cancels it on the node and records a failed outcome', async () => {
    // An agent that takes jobs and never answers (a real agent enforces the time limit itself).
    const mute = await muteAgent(t, owner.client, { kinds: ['sandbox'] });
    try {
      const e = await expectApiError(hub().dispatch({ kind: 'diag.wait', payload: { ms: 1 }, timeoutMs: 100, nodeId: mute.nodeId }), 504, 'upstream_timeout');
      const jobId = String(e.body?.error.job_id);
      expect(await jobRow(jobId)).toMatchObject({ status: 'timed_out' });
      await until('cancel sent', async () => mute.got.some((m) => m.type === 'cancel' && m.job_id === jobId && m.reason === 'timed out'));
      expect(await entry(mute.nodeId)).toMatchObject({ reliability: 0, jobs_dispatched: 1, latency_ms: null });
      // A job with an idle limit: the same backstop 5 s past it, for an agent that does not enforce it.
      const idle = await expectApiError(hub().dispatch({ kind: 'diag.wait', payload: { ms: 1 }, timeoutMs: 60_000, idleTimeoutMs: 100, nodeId: mute.nodeId }), 504, 'upstream_timeout');
      expect(idle.body?.error.message).toBe('Job had no output for 100 ms');
      expect(mute.got.find((m) => m.type === 'job' && m.job_id === idle.body?.error.job_id)).toMatchObject({ timeout_ms: 60_000, idle_timeout_ms: 100 });
    } finally {
      await mute.close();
    }
  });
});

describe('the node-drop rule', () => {
  it('an agent that reconnects within the grace period and reports the job in hello lets it finish', { timeout: 30_000 }, async () => {
    const c = await startAgent(proxy.url);
    const chunks: string[] = [];
    // The job outlasts the grace period: without the agent's hello it would be declared lost mid-run.
    const ms = GRACE_MS + 2000;
    const job = hub().dispatch({ kind: 'diag.wait', payload: { ms, say: 'started' }, timeoutMs: 20_000, nodeId: c.nodeId, onOutput: (o) => chunks.push(o.data) });
    await until('output began', async () => chunks.length > 0);
    const jobId = hub().openJobs().find((j) => j.nodeId === c.nodeId)!.jobId;
    const count = await jobCount();
    proxy.cut(); // the network drops; the agent (and its job) keeps running
    await until('channel dropped', async () => !hub().isConnected(c.nodeId), 5000);
    await until('agent back', async () => hub().isConnected(c.nodeId), GRACE_MS);
    const r = await job;
    expect(r).toMatchObject({ jobId, nodeId: c.nodeId, result: { waited_ms: ms } });
    expect(chunks).toEqual(['started']);
    expect(await jobRow(jobId)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(await jobCount()).toBe(count); // carried on, not run again
    expect(c.output()).toMatch(/channel closed/);
  });

  it('a job sent into a connection the agent had already left (replaced before its close arrived) is lost at once, not left to time out', { timeout: 30_000 }, async () => {
    const own = await tcpProxy(t.url);
    try {
      const c = await startAgent(own.url);
      own.strand(); // the agent's side closes; the control plane's stays open and silent: its channel stays attached
      // The job goes into the stranded channel and never reaches the agent, which reconnects and says it runs
      // nothing. Before that was taken as the answer, the job waited for its time limit (60 s here).
      const e = await expectApiError(hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 60_000, nodeId: c.nodeId }), 502, 'upstream_error');
      expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
      expect(await jobRow(String(e.body?.error?.job_id))).toMatchObject({ status: 'failed', error: 'node lost' });
      expect(hub().openJobs()).toEqual([]);
      await until('the agent is back', async () => hub().isConnected(c.nodeId));
      expect((await hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['back'] }, timeoutMs: 10_000, nodeId: c.nodeId })).result).toEqual({ chunks: 1 });
    } finally {
      await own.close();
    }
  });

  it('a drop after output began fails the job upstream_error / node_lost, without running it again', async () => {
    await startAgent(); // a second direct node: a retry would have somewhere to go
    const chunks: string[] = [];
    const job = hub().dispatch({ kind: 'diag.wait', payload: { ms: 8000, say: 'started' }, timeoutMs: 30_000, onOutput: (o) => chunks.push(o.data) });
    job.catch(() => undefined);
    await until('output began', async () => chunks.length > 0);
    const open = hub().openJobs()[0]!;
    const count = await jobCount();
    const victim = agents.find((a) => a.nodeId === open.nodeId)!;
    await victim.kill();
    const e = await expectApiError(job, 502, 'upstream_error');
    expect(e.body?.error).toMatchObject({ reason: 'node_lost', job_id: open.jobId });
    expect(await jobRow(open.jobId)).toMatchObject({ status: 'failed', error: 'node lost' });
    expect(await jobCount()).toBe(count); // no second attempt anywhere
    expect(hub().openJobs()).toEqual([]);
    expect((await t.gw.database.db.selectFrom('nodes').select('failed').where('id', '=', victim.nodeId).executeTakeFirstOrThrow()).failed).toBeGreaterThanOrEqual(1);
  });
});

describe('a channel that detaches between the pick and the send', () => {
  it('the job is lost before output (a clear 502, the record ended, nothing open), not a crash; the node is not held to it', async () => {
    const c = await startAgent();
    const before = await t.gw.database.db.selectFrom('nodes').select(['failed']).where('id', '=', c.nodeId).executeTakeFirstOrThrow();
    const db = t.gw.database.db;
    const insertInto = db.insertInto.bind(db);
    const spy = vi.spyOn(db, 'insertInto').mockImplementation(((table: Parameters<typeof insertInto>[0]) => {
      // The node's channel goes away once the node is picked, while the job's record is written (what another
      // connection of the node taking the channel and then dropping does).
      if (table === 'jobs') hub().detach(hub().attach(c.nodeId));
      return insertInto(table);
    }) as typeof db.insertInto);
    const e = await expectApiError(hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 10_000, nodeId: c.nodeId }), 502, 'upstream_error');
    spy.mockRestore();
    expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
    const jobId = String(e.body?.error?.job_id);
    expect(await jobRow(jobId)).toMatchObject({ status: 'failed', error: 'node lost' });
    expect(hub().openJobs()).toEqual([]);
    expect((await t.gw.database.db.selectFrom('nodes').select(['failed']).where('id', '=', c.nodeId).executeTakeFirstOrThrow()).failed).toBe(before.failed);
    // The agent subscribes again and takes jobs.
    await until('the agent is back', async () => hub().isConnected(c.nodeId));
    expect((await hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['back'] }, timeoutMs: 10_000, nodeId: c.nodeId })).result).toEqual({ chunks: 1 });
  });
});

describe('a channel the agent left that ends after its hello on a later connection, before that connection attached', () => {
  it('a job sent into it after that hello is lost at once; the job that hello named is out of the grace once its connection attaches', async () => {
    const c = await startAgent();
    const heard = await until('the hub heard the agent say hello', async () => (hub() as unknown as { hellos: Map<string, number> }).hellos.get(c.nodeId));
    await c.kill(); // its own channel ends; the node stays eligible (its last heartbeat is recent)
    await until('the channel detached', async () => !hub().isConnected(c.nodeId));
    // Connection n: one the agent left without its close reaching us (numbered after the agent's last hello,
    // which made it the latest the hub heard of). Then the agent's hello on connection n + 1, whose channel has
    // not attached yet (its subscription is slower than its hello).
    const n = heard + 10;
    const stale = hub().attach(c.nodeId, n);
    const echo = () => hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 60_000, nodeId: c.nodeId });
    const named = echo();
    await until('the first job is sent', async () => hub().openJobs().length === 1);
    const namedId = hub().openJobs()[0]!.jobId;
    expect(await hub().hello(c.nodeId, [namedId], n + 1)).toEqual({ cancelled: [] });
    const sentAfter = echo();
    await until('the second job is sent', async () => hub().openJobs().length === 2);
    hub().detach(stale);
    // The job sent after the hello went where nobody was: lost now, not after the grace (nor at its time limit).
    expect(hub().openJobs().map((j) => j.jobId)).toEqual([namedId]);
    const e = await expectApiError(sentAfter, 502, 'upstream_error');
    expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
    expect(await jobRow(String(e.body?.error?.job_id))).toMatchObject({ status: 'failed', error: 'node lost' });
    // The named one runs on connection n + 1: once that connection's channel attaches, it is not waiting to be
    // lost (it was, before: lost when the grace ran out, although it ran).
    const pending = (hub() as unknown as { jobs: { get(id: string): { lostTimer?: NodeJS.Timeout } | undefined } }).jobs.get(namedId);
    expect(pending?.lostTimer).toBeDefined(); // until then it waits in the grace: a connection that never attaches leaves it no channel
    const later = hub().attach(c.nodeId, n + 1);
    expect(pending?.lostTimer).toBeUndefined();
    await hub().onFinish(c.nodeId, { job_id: namedId, ok: true, result: { chunks: 1 }, duration_ms: 1 }, n + 1);
    expect(await named).toMatchObject({ jobId: namedId, result: { chunks: 1 } });
    hub().detach(later);
  });
});

describe('the job subscription', () => {
  it("an older connection of the agent attaching late does not put the current connection's running job at risk", { timeout: 30_000 }, async () => {
    const c = await startAgent();
    const chunks: string[] = [];
    const ms = GRACE_MS + 2000; // outlasts the grace: a job wrongly put in it would be lost mid-run
    const job = hub().dispatch({ kind: 'diag.wait', payload: { ms, say: 'started' }, timeoutMs: 20_000, nodeId: c.nodeId, onOutput: (o) => chunks.push(o.data) });
    await until('output began', async () => chunks.length > 0);
    // A stale connection numbered before the agent's current one takes the channel (its subscription was
    // processed late); the agent's subscription ends and it subscribes again on its current connection.
    const stale = hub().attach(c.nodeId, 0);
    expect(await stale.queue.iterate().next()).toEqual({ done: true, value: undefined });
    expect(await job).toMatchObject({ nodeId: c.nodeId, result: { waited_ms: ms } });
  });

  it('an agent whose subscription the control plane ends (another channel of the node took over) subscribes again and takes jobs', async () => {
    const c = await startAgent();
    // What a second connection of the same node does: the hub takes the new channel and ends the agent's subscription.
    const other = hub().attach(c.nodeId);
    // That channel's queue ends once the agent's new subscription takes the node's channel back.
    expect(await other.queue.iterate().next()).toEqual({ done: true, value: undefined });
    expect(c.output()).toContain('the control plane ended the job subscription; subscribing again');
    const r = await hub().dispatch({ kind: 'diag.echo', payload: { chunks: ['still here'] }, timeoutMs: 10_000, nodeId: c.nodeId });
    expect(r.result).toEqual({ chunks: 1 });
  });
});
