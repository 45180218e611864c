import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { RECEIPT_HEADERS, type JobFinish } from '@svc/shared';
import { ENFORCED_BILLING, startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, tcpProxy, until, type TestAgent } from './support/agent.ts';
import { startChildGateway } from './support/child-gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { openDatabase } from '../control-plane/src/db/database.ts';
import { FleetRelay, type RelayMessage } from '../control-plane/src/fleet/relay.ts';

/**
 * Dispatch across control-plane processes on one Postgres (ARCHITECTURE decision 2): a job picked on process
 * A for a node whose agent is connected to process B goes through B over NOTIFY, with its output, finish,
 * cancel and the node-drop rule; a holder that leaves the database loses its jobs without hanging them.
 * Postgres only: the embedded database serves one process.
 */
const GRACE_MS = 1500;
const MODEL = 'relay-llama';
let a: TestGateway & { databaseUrl: string | undefined; dataDir: string };
let b: TestGateway;
let closePair: () => Promise<void>;
let owner: Awaited<ReturnType<TestGateway['signIn']>>;
let up: TestUpstream;
const agents: TestAgent[] = [];

const channelOf = async (nodeId: string) => (await a.gw.database.db.selectFrom('nodes').select(['channel_process', 'last_heartbeat_at']).where('id', '=', nodeId).executeTakeFirstOrThrow());
const counts = (nodeId: string) => a.gw.database.db.selectFrom('nodes').select(['succeeded', 'failed']).where('id', '=', nodeId).executeTakeFirstOrThrow();
const jobRow = (id: string) => a.gw.database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** An agent enrolled on A, connected to `holder` (B by default), once `holder` is recorded as holding its channel. */
async function agentOn(holder: { url: string; processId: string }, body: Parameters<typeof enrollAgent>[2] = { kinds: ['sandbox'] }, env: Record<string, string> = {}) {
  const agent = await enrollAgent(a, owner.client, body, { url: holder.url });
  agents.push(agent);
  agent.start({ SVC_DOCKER_SOCKET: '/nonexistent/docker.sock', ...env });
  await until(`${agent.nodeId} held by ${holder.processId}`, async () => {
    const r = await channelOf(agent.nodeId);
    return r.channel_process === holder.processId && r.last_heartbeat_at !== null;
  });
  return agent;
}

/** A diag.wait job dispatched on A to the node, once its first output arrived; `seen` collects its output. */
async function waitingJob(nodeId: string, payload: { ms: number; say: string; then?: string }, opts: { timeoutMs?: number; signal?: AbortSignal; seen?: string[] } = {}) {
  const seen = opts.seen ?? [];
  let started!: () => void;
  const output = new Promise<void>((r) => (started = r));
  const job = a.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload, timeoutMs: opts.timeoutMs ?? 20_000, nodeId, signal: opts.signal, onOutput: (o) => (seen.push(o.data), started()) });
  await output;
  return { job, seen };
}

describe.skipIf(TEST_DB_KIND === 'pglite')('dispatch across control-plane processes', () => {
  beforeAll(async () => {
    up = await startUpstream();
    const env = { ...ENFORCED_BILLING, SVC_NODE_MODEL_PRICES: JSON.stringify({ [MODEL]: { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 3_000_000 } }) };
    ({ a, b, close: closePair } = await startGatewayPair({ reconnectGraceMs: GRACE_MS, env }));
    owner = await a.signIn();
  });
  afterAll(async () => {
    for (const x of agents) await x.kill();
    await closePair?.();
    await up?.close();
  });
  const B = () => ({ url: b.url, processId: b.gw.database.processId });

  it('a job picked on A runs on a node whose channel B holds; output (large chunks too) and the finish come back in order; A keeps the record', async () => {
    const agent = await agentOn(B());
    expect(a.gw.fleet.hub.isConnected(agent.nodeId)).toBe(false);
    expect(await a.gw.fleet.hub.reachable(agent.nodeId)).toBe(true);
    const before = await counts(agent.nodeId);
    // Chunks over the NOTIFY payload limit (8000 bytes) too: messages are rows, a NOTIFY only wakes the receiver.
    const chunks = ['one', 'x'.repeat(60_000), 'three', 'é'.repeat(5000), 'five'];
    const seen: string[] = [];
    const job = await a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks }, timeoutMs: 20_000, nodeId: agent.nodeId, onOutput: (o) => seen.push(o.data) });
    expect(job.result).toEqual({ chunks: chunks.length });
    expect(seen).toEqual(chunks);
    expect(await jobRow(job.jobId)).toMatchObject({ status: 'succeeded', node_id: agent.nodeId, error: null });
    expect(await counts(agent.nodeId)).toEqual({ succeeded: before.succeeded + 1, failed: before.failed });
    expect(b.gw.fleet.hub.relayedJobs()).toEqual([]);
    expect(b.gw.fleet.hub.openJobs()).toEqual([]); // B only relayed it
    expect(await a.gw.database.db.selectFrom('fleet_messages').select('id').execute()).toEqual([]); // read and deleted
    // Unpinned jobs pick it too (A has no agent of its own).
    expect((await a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['hi'] }, timeoutMs: 20_000 })).nodeId).toBe(agent.nodeId);
  });

  it("a caller's abort on A cancels the job on the node through B", async () => {
    const agent = agents[0]!;
    const finishes = vi.spyOn(b.gw.fleet.hub, 'onFinish');
    const ac = new AbortController();
    const { job } = await waitingJob(agent.nodeId, { ms: 30_000, say: 'started' }, { timeoutMs: 60_000, signal: ac.signal });
    const jobId = a.gw.fleet.hub.openJobs()[0]!.jobId;
    expect(b.gw.fleet.hub.relayedJobs()).toEqual([{ jobId, nodeId: agent.nodeId, origin: a.gw.database.processId }]);
    ac.abort();
    await expectApiError(job, 409, 'conflict');
    expect(await jobRow(jobId)).toMatchObject({ status: 'canceled', error: 'caller went away' });
    const report = await until('the node reports the job stopped', async () => finishes.mock.calls.map(([, f]) => f as JobFinish).find((f) => f.job_id === jobId), 10_000);
    finishes.mockRestore();
    expect(report).toMatchObject({ ok: false, error: 'canceled: caller went away' });
    expect(b.gw.fleet.hub.relayedJobs()).toEqual([]);
  });

  it('the node drop rule applies through the holder: back within the grace, the job carries on; gone after output began, A fails it node_lost', async () => {
    const proxy = await tcpProxy(b.url);
    const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId });
    const seen: string[] = [];
    // Carries on: the agent reconnects to B at once (the proxy cut its connection only) and reports the job.
    const { job: kept } = await waitingJob(agent.nodeId, { ms: 2500, say: 'kept' }, { seen });
    proxy.cut();
    expect((await kept).result).toEqual({ waited_ms: 2500 });

    // Lost: the agent cannot come back (the proxy refuses it) within the grace.
    const before = await counts(agent.nodeId);
    const { job: lost } = await waitingJob(agent.nodeId, { ms: 30_000, say: 'lost' }, { timeoutMs: 60_000, seen });
    proxy.block();
    proxy.cut();
    const e = await expectApiError(lost, 502, 'upstream_error');
    expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
    expect(seen).toEqual(['kept', 'lost']);
    expect(await counts(agent.nodeId)).toEqual({ succeeded: before.succeeded, failed: before.failed + 1 }); // the node dropped: it counts
    expect(b.gw.fleet.hub.relayedJobs()).toEqual([]);
    await proxy.close();
  });

  it('an agent that moves from the holder to the origin mid-job: the job carries on there', async () => {
    const proxy = await tcpProxy(b.url);
    const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId });
    const { job, seen } = await waitingJob(agent.nodeId, { ms: 2500, say: 'moving' });
    proxy.retarget(a.url);
    proxy.cut();
    expect((await job).result).toEqual({ waited_ms: 2500 });
    expect(seen).toEqual(['moving']);
    expect(a.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
    await until('the record names A', async () => (await channelOf(agent.nodeId)).channel_process === a.gw.database.processId);
    // B's late `lost` (its grace ran out) finds nothing to act on.
    await new Promise((r) => setTimeout(r, GRACE_MS + 500));
    expect(a.gw.fleet.hub.openJobs()).toEqual([]);
    expect(b.gw.fleet.hub.relayedJobs()).toEqual([]);
    await proxy.close();
  });

  /** A gateway process on A's database besides A and B (each test stops its own). */
  const third = () => startTestGateway({ reconnectGraceMs: GRACE_MS, share: { databaseUrl: a.databaseUrl, dataDir: a.dataDir }, clock: a.clock });

  it('an agent that reconnects mid-job to a third process: that process relays the job to A from then on, output after the move included', async () => {
    const c = await third();
    const proxy = await tcpProxy(b.url);
    try {
      const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId });
      const before = await counts(agent.nodeId);
      const { job, seen } = await waitingJob(agent.nodeId, { ms: 3000, say: 'before', then: 'after' });
      proxy.retarget(c.url);
      proxy.cut();
      await until('C relays the job', async () => c.gw.fleet.hub.relayedJobs().length === 1);
      expect(c.gw.fleet.hub.relayedJobs()).toEqual([{ jobId: a.gw.fleet.hub.openJobs()[0]!.jobId, nodeId: agent.nodeId, origin: a.gw.database.processId }]);
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 3000 });
      expect(seen).toEqual(['before', 'after']);
      expect(await jobRow(r.jobId)).toMatchObject({ status: 'succeeded', error: null, origin_process: a.gw.database.processId });
      expect(await counts(agent.nodeId)).toEqual({ succeeded: before.succeeded + 1, failed: before.failed });
      expect(c.gw.fleet.hub.relayedJobs()).toEqual([]);
      // B, which held the channel before, forgets the job once the grace ran out; nothing is left open on A.
      await until('B forgot the job', async () => b.gw.fleet.hub.relayedJobs().length === 0, 10_000);
      expect(a.gw.fleet.hub.openJobs()).toEqual([]);
    } finally {
      await proxy.close();
      await c.stop();
    }
  });

  it("a process the agent left without a close reaching it does not write itself back over the agent's later connection; jobs go through that one", async () => {
    const c = await third();
    const proxy = await tcpProxy(b.url);
    try {
      const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId });
      const epochOf = async () => Number((await a.gw.database.db.selectFrom('nodes').select('channel_epoch').where('id', '=', agent.nodeId).executeTakeFirstOrThrow()).channel_epoch);
      const onB = await epochOf();
      proxy.retarget(c.url);
      proxy.strand(); // B's end of the connection stays open and silent: B still thinks it holds the channel
      await until('the record names C', async () => (await channelOf(agent.nodeId)).channel_process === c.gw.database.processId);
      expect(b.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
      expect(await epochOf()).toBeGreaterThan(onB);
      await b.gw.fleet.hub.watch(); // B's periodic reassert of the channels it holds
      expect((await channelOf(agent.nodeId)).channel_process).toBe(c.gw.database.processId);
      const job = await a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['through C'] }, timeoutMs: 10_000, nodeId: agent.nodeId });
      expect(job.result).toEqual({ chunks: 1 });
      // B itself sends the node's jobs through C too, not onto its stranded channel.
      expect(await b.gw.fleet.hub.reachable(agent.nodeId)).toBe(true);
      const picked = await b.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['from B'] }, timeoutMs: 10_000, nodeId: agent.nodeId });
      expect(picked.result).toEqual({ chunks: 1 });

      // A job relayed through C; then what B sees of the agent coming back on a later connection whose hello
      // runs before that connection's channel replaced the stranded one there (its node-key lookup took longer):
      // B, which still relays the job, tells A `moved` with the later connection's number, not the stranded one's
      // (A would take it for a late `moved` and keep following C, which the agent left).
      const onC = await epochOf();
      const fromB = vi.spyOn(a.gw.fleet.hub as unknown as { onRelay(from: string, m: RelayMessage): void }, 'onRelay');
      const { job: relayed } = await waitingJob(agent.nodeId, { ms: 2500, say: 'on C' });
      const jobId = a.gw.fleet.hub.openJobs()[0]!.jobId;
      await b.gw.fleet.hub.hello(agent.nodeId, [jobId], onC + 1);
      const moved = await until('A hears from B', async () => fromB.mock.calls.find(([from, m]) => from === b.gw.database.processId && m.t === 'moved')?.[1]);
      fromB.mockRestore();
      expect(moved).toEqual({ t: 'moved', job: jobId, connection: onC + 1 });
      expect((await relayed).result).toEqual({ waited_ms: 2500 });
    } finally {
      await proxy.close();
      await c.stop();
    }
  });

  it("an agent that moves mid-job from the origin's own channel to another process: the job carries on through that process", async () => {
    const proxy = await tcpProxy(a.url);
    try {
      const agent = await agentOn({ url: proxy.url, processId: a.gw.database.processId });
      const { job, seen } = await waitingJob(agent.nodeId, { ms: 2500, say: 'before', then: 'after' });
      proxy.retarget(b.url);
      proxy.cut();
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 2500 });
      expect(seen).toEqual(['before', 'after']);
      expect(await jobRow(r.jobId)).toMatchObject({ status: 'succeeded', error: null });
      expect(b.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
      expect(b.gw.fleet.hub.relayedJobs()).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it("a `moved` from an older connection of the agent than the one its job is on (it took longer than the later one's) does not take the job back there", async () => {
    const c = await third();
    const proxy = await tcpProxy(b.url);
    const dx = await openDatabase({ databaseUrl: a.databaseUrl });
    const x = new FleetRelay(dx, () => undefined);
    const toX: RelayMessage[] = [];
    const finishes = vi.spyOn(c.gw.fleet.hub, 'onFinish');
    try {
      await x.start((_from, m) => toX.push(m));
      const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId });
      const onB = Number((await a.gw.database.db.selectFrom('nodes').select('channel_epoch').where('id', '=', agent.nodeId).executeTakeFirstOrThrow()).channel_epoch);
      const ac = new AbortController();
      const { job } = await waitingJob(agent.nodeId, { ms: 30_000, say: 'started' }, { timeoutMs: 60_000, signal: ac.signal });
      const jobId = a.gw.fleet.hub.openJobs()[0]!.jobId;
      proxy.retarget(c.url);
      proxy.cut();
      await until('C relays the job', async () => c.gw.fleet.hub.relayedJobs().length === 1);
      // The `moved` of a process the agent was on before C (its connection numbered as B's was) arrives late.
      await x.send(a.gw.database.processId, { t: 'moved', job: jobId, connection: onB });
      await x.send(a.gw.database.processId, { t: 'accepted', job: 'marker' }); // sent after it: A has read the `moved` once this is gone
      await until('A read the late moved', async () => (await dx.db.selectFrom('fleet_messages').select('id').where('receiver', '=', a.gw.database.processId).execute()).length === 0);
      // A still follows C: the caller's cancel reaches the agent through C, and nothing goes to the late process.
      ac.abort();
      await expectApiError(job, 409, 'conflict');
      const report = await until('the node reports the job stopped', async () => finishes.mock.calls.map(([, f]) => f as JobFinish).find((f) => f.job_id === jobId), 10_000);
      expect(report).toMatchObject({ ok: false, error: 'canceled: caller went away' });
      expect(toX).toEqual([]);
    } finally {
      finishes.mockRestore();
      await x.close();
      await dx.close();
      await proxy.close();
      await c.stop();
    }
  });

  it('a process the agent reaches and leaves while it looks up a job does not take the job over; the holder keeps relaying it', async () => {
    const c = await third();
    try {
      const agent = await agentOn(B());
      const { job, seen } = await waitingJob(agent.nodeId, { ms: 2500, say: 'before', then: 'after' });
      const jobId = a.gw.fleet.hub.openJobs()[0]!.jobId;
      // What C's channel sees of an agent that connects, says hello with the job, and is gone again before C's
      // lookup of the job's origin answered (it went back to B, which never noticed it leave).
      const conn = c.gw.fleet.hub.attach(agent.nodeId);
      const hello = c.gw.fleet.hub.hello(agent.nodeId, [jobId]);
      c.gw.fleet.hub.detach(conn);
      expect(await hello).toEqual({ cancelled: [] }); // someone's job: not cancelled
      expect(c.gw.fleet.hub.relayedJobs()).toEqual([]);
      const r = await job; // B's output and finish still reach A
      expect(r.result).toEqual({ waited_ms: 2500 });
      expect(seen).toEqual(['before', 'after']);
    } finally {
      await c.stop();
    }
  });

  it('output the process the agent left relays late still reaches A, once each', async () => {
    const proxy = await tcpProxy(b.url);
    try {
      const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId });
      const { job, seen } = await waitingJob(agent.nodeId, { ms: 3000, say: 'before' });
      const jobId = a.gw.fleet.hub.openJobs()[0]!.jobId;
      proxy.retarget(a.url);
      proxy.cut();
      await until('the agent is on A', async () => a.gw.fleet.hub.isConnected(agent.nodeId));
      // What B's relay delivers after the move when it was behind: an output the agent gave B before it left,
      // and one A already has.
      const fromB = (b.gw.fleet.hub as unknown as { relay: FleetRelay }).relay;
      await fromB.send(a.gw.database.processId, { t: 'output', job: jobId, o: { job_id: jobId, seq: 0, stream: 'data', data: 'before' } });
      await fromB.send(a.gw.database.processId, { t: 'output', job: jobId, o: { job_id: jobId, seq: 1, stream: 'data', data: 'late from B' } });
      expect((await job).result).toEqual({ waited_ms: 3000 });
      expect(seen).toEqual(['before', 'late from B']);
    } finally {
      await proxy.close();
    }
  });

  it('a holder that shuts down mid-job: its agent reconnects to another process and the job carries on there', async () => {
    const c = await third();
    const proxy = await tcpProxy(c.url);
    try {
      const agent = await agentOn({ url: proxy.url, processId: c.gw.database.processId });
      const before = await counts(agent.nodeId);
      const { job, seen } = await waitingJob(agent.nodeId, { ms: 3000, say: 'before', then: 'after' });
      proxy.retarget(b.url);
      await c.stop(); // closes the agent's connection: it dials again, through the proxy, to B
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 3000 });
      expect(seen).toEqual(['before', 'after']);
      expect(await counts(agent.nodeId)).toEqual({ succeeded: before.succeeded + 1, failed: before.failed });
      expect(b.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
    } finally {
      await proxy.close();
      await c.stop();
    }
  });

  it('a holder killed mid-job, its agent not back within the grace: A loses the job without holding it against the node, and stops dispatching through it', async () => {
    const child = await startChildGateway({ dataDir: a.dataDir, databaseUrl: a.databaseUrl });
    try {
      const agent = await enrollAgent(a, owner.client, { kinds: ['sandbox'] }, { url: child.url });
      agents.push(agent);
      agent.start({ SVC_DOCKER_SOCKET: '/nonexistent/docker.sock' });
      const holder = await until('the child holds the channel', async () => {
        const r = await channelOf(agent.nodeId);
        return r.last_heartbeat_at && r.channel_process && r.channel_process !== a.gw.database.processId && r.channel_process !== b.gw.database.processId ? r.channel_process : undefined;
      });
      const before = await counts(agent.nodeId);
      const job = a.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload: { ms: 30_000 }, timeoutMs: 60_000, nodeId: agent.nodeId });
      await until('the child relays the job', async () => a.gw.fleet.hub.openJobs().length === 1 && (await a.gw.database.processesAlive([holder])).has(holder));
      await child.kill();
      await until('the child left the database', async () => !(await a.gw.database.processesAlive([holder])).has(holder));
      await a.gw.fleet.hub.watchRelayed(); // what the watch timer does every few seconds: missing once is not gone
      expect(a.gw.fleet.hub.openJobs()).toHaveLength(1);
      await a.gw.fleet.hub.watchRelayed(); // missing twice in a row is: the grace starts (its agent may reconnect elsewhere)
      // Not back within the grace; lost before output: dispatched once more, but the job is pinned to that node, so it fails as lost.
      const e = await expectApiError(job, 502, 'upstream_error');
      expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
      expect(await counts(agent.nodeId)).toEqual(before); // the relaying process failed, not the node
      expect(a.gw.fleet.hub.openJobs()).toEqual([]);
      // Its record still names the dead process; it is not reachable, and a job for it fails at once.
      expect((await channelOf(agent.nodeId)).channel_process).toBe(holder);
      expect(await a.gw.fleet.hub.reachable(agent.nodeId)).toBe(false);
      await expectApiError(a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: [] }, timeoutMs: 5000, nodeId: agent.nodeId }), 503, 'no_capacity');
    } finally {
      await child.kill();
    }
  });

  it('a holder killed mid-job whose agent reconnects to another process: the job carries on there', async () => {
    const child = await startChildGateway({ dataDir: a.dataDir, databaseUrl: a.databaseUrl });
    const proxy = await tcpProxy(child.url);
    try {
      const agent = await enrollAgent(a, owner.client, { kinds: ['sandbox'] }, { url: proxy.url });
      agents.push(agent);
      agent.start({ SVC_DOCKER_SOCKET: '/nonexistent/docker.sock' });
      const holder = await until('the child holds the channel', async () => {
        const r = await channelOf(agent.nodeId);
        return r.last_heartbeat_at && r.channel_process && ![a.gw.database.processId, b.gw.database.processId].includes(r.channel_process) ? r.channel_process : undefined;
      });
      const { job, seen } = await waitingJob(agent.nodeId, { ms: 4000, say: 'before', then: 'after' });
      proxy.retarget(b.url);
      await child.kill();
      await until('B relays the job', async () => b.gw.fleet.hub.relayedJobs().length === 1, 10_000);
      await until('the child left the database', async () => !(await a.gw.database.processesAlive([holder])).has(holder));
      await a.gw.fleet.hub.watchRelayed();
      await a.gw.fleet.hub.watchRelayed(); // the dead child no longer holds the job: nothing to lose
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 4000 });
      expect(seen).toEqual(['before', 'after']);
      expect(await jobRow(r.jobId)).toMatchObject({ status: 'succeeded', error: null });
    } finally {
      await proxy.close();
      await child.kill();
    }
  });

  it('the relay alone: messages about one job, sent without waiting, arrive in the order sent, large ones too', async () => {
    const [dx, dy] = await Promise.all([openDatabase({ databaseUrl: a.databaseUrl }), openDatabase({ databaseUrl: a.databaseUrl })]);
    const errors: unknown[] = [];
    const x = new FleetRelay(dx, (e) => errors.push(e));
    const y = new FleetRelay(dy, (e) => errors.push(e));
    const got: Array<{ from: string; m: RelayMessage }> = [];
    try {
      await y.start((from, m) => got.push({ from, m }));
      const data = (i: number) => (i % 3 === 0 ? `${i}:${'L'.repeat(9000)}` : `${i}`);
      const sends: Array<Promise<void>> = [];
      for (let i = 0; i < 120; i++) {
        for (const job of ['j1', 'j2']) sends.push(x.send(dy.processId, { t: 'output', job, o: { job_id: job, seq: i, stream: 'data', data: data(i) } }));
      }
      await Promise.all(sends);
      await until('every message arrived', async () => got.length === 240, 10_000);
      for (const job of ['j1', 'j2']) {
        const mine = got.filter((g) => g.m.job === job).map((g) => (g.m as Extract<RelayMessage, { t: 'output' }>).o);
        expect(mine.map((o) => o.seq)).toEqual([...Array(120).keys()]);
        expect(mine.every((o) => o.data === data(o.seq))).toBe(true);
      }
      expect(new Set(got.map((g) => g.from))).toEqual(new Set([dx.processId]));
      expect(await dx.db.selectFrom('fleet_messages').select('id').where('receiver', '=', dy.processId).execute()).toEqual([]); // read and deleted
      expect(errors).toEqual([]);
      // A process is alive while its LISTEN connection is open.
      expect(await x.alive([dy.processId, dx.processId, 'svc_p_nobody'])).toEqual(new Set([dy.processId]));
      // That connection killed on the server: a message sent while it is away (its NOTIFY missed) is read later,
      // and the connection is opened again.
      await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${dy.processId}`.execute(dx.db);
      await until('the listener is gone', async () => !(await x.alive([dy.processId])).has(dy.processId), 10_000);
      await x.send(dy.processId, { t: 'accepted', job: 'j3' });
      await until('the listener is back', async () => (await x.alive([dy.processId])).has(dy.processId), 10_000);
      await until('the message sent meanwhile arrived', async () => got.some((g) => g.m.job === 'j3'), 10_000);
    } finally {
      await y.close();
      await dy.close();
      await dx.close();
    }
    expect(await a.gw.database.processesAlive([dy.processId])).toEqual(new Set());
  });

  it('inference: the openai SDK on A, streamed and not, served by a node agent connected to B', async () => {
    const agent = await agentOn(B(), { kinds: ['inference'], models: [MODEL], model_map: { [MODEL]: 'llama3:8b' } }, { SVC_INFERENCE_URL: up.url });
    const s = await a.signIn();
    await a.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `relay-${s.accountId}`);
    const oa = new OpenAI({ apiKey: (await s.client.createKey()).key, baseURL: `${a.url}/v1`, maxRetries: 0 });
    const { data, response } = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }] }).withResponse();
    expect(up.requests.at(-1)!.body).toMatchObject({ model: 'llama3:8b' });
    expect(data).toMatchObject({ model: MODEL, choices: [{ message: { content: up.switches.reply } }], usage: { prompt_tokens: 3, completion_tokens: 11 } });
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(3 + 11 * 3));
    let text = '';
    const stream = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } });
    let usage: unknown = null;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe(up.switches.reply);
    expect(usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 11 });
    const jobs = await a.gw.database.db.selectFrom('jobs').select(['kind', 'status']).where('node_id', '=', agent.nodeId).orderBy('created_at').execute();
    expect(jobs).toEqual([
      { kind: 'inference.chat', status: 'succeeded' },
      { kind: 'inference.chat', status: 'succeeded' },
    ]);
    await agent.kill(); // the next test's node is the only one serving the model
  });

  it('inference: a completion streamed through the openai SDK carries on, whole and in order, while its agent reconnects to a third process', async () => {
    const c = await third();
    const proxy = await tcpProxy(b.url);
    try {
      const agent = await agentOn({ url: proxy.url, processId: b.gw.database.processId }, { kinds: ['inference'], models: [MODEL], model_map: { [MODEL]: 'llama3:8b' } }, { SVC_INFERENCE_URL: up.url });
      const s = await a.signIn();
      await a.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `move-${s.accountId}`);
      const oa = new OpenAI({ apiKey: (await s.client.createKey()).key, baseURL: `${a.url}/v1`, maxRetries: 0 });
      up.switches.chunkDelayMs = 150;
      const stream = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } });
      let text = '';
      let usage: unknown = null;
      let moved = false;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) usage = chunk.usage;
        if (text && !moved) {
          moved = true;
          proxy.retarget(c.url);
          proxy.cut();
        }
      }
      expect(text).toBe(up.switches.reply);
      expect(usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 11 });
      expect(c.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
      const jobs = await a.gw.database.db.selectFrom('jobs').select(['status']).where('node_id', '=', agent.nodeId).execute();
      expect(jobs).toEqual([{ status: 'succeeded' }]);
    } finally {
      up.switches.chunkDelayMs = 0;
      await proxy.close();
      await c.stop();
    }
  });
});
