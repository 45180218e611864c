import { describe, expect, it, vi } from 'vitest';
import type { JobFinish } from '@svc/shared';
import { tcpProxy, until } from './support/agent.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { GRACE_MS, RelayPair } from './support/relay-pair.ts';
import { openDatabase } from '../control-plane/src/db/database.ts';
import { FleetRelay, type RelayMessage } from '../control-plane/src/fleet/relay.ts';

/**
 * Dispatch across control-plane processes on one Postgres (ARCHITECTURE decision 2): a job picked on process
 * A for a node whose agent is connected to process B goes through B over NOTIFY, with its output, finish,
 * cancel and the node-drop rule, and carries on wherever its agent reconnects (the origin, the holder, a third
 * process), whatever order the processes hear of it in. Holders that go away, the relay itself and inference
 * are in fleet-relay-holders.test.ts. Postgres only: the embedded database serves one process.
 */
describe.skipIf(TEST_DB_KIND === 'pglite')('dispatch across control-plane processes', () => {
  const pair = new RelayPair();

  it('a job picked on A runs on a node whose channel B holds; output (large chunks too) and the finish come back in order; A keeps the record', async () => {
    const agent = await pair.agentOn(pair.B());
    expect(pair.a.gw.fleet.hub.isConnected(agent.nodeId)).toBe(false);
    expect(await pair.a.gw.fleet.hub.reachable(agent.nodeId)).toBe(true);
    const before = await pair.counts(agent.nodeId);
    // Chunks over the NOTIFY payload limit (8000 bytes) too: messages are rows, a NOTIFY only wakes the receiver.
    const chunks = ['one', 'x'.repeat(60_000), 'three', 'é'.repeat(5000), 'five'];
    const seen: string[] = [];
    const job = await pair.a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks }, timeoutMs: 20_000, nodeId: agent.nodeId, onOutput: (o) => seen.push(o.data) });
    expect(job.result).toEqual({ chunks: chunks.length });
    expect(seen).toEqual(chunks);
    expect(await pair.jobRow(job.jobId)).toMatchObject({ status: 'succeeded', node_id: agent.nodeId, error: null });
    expect(await pair.counts(agent.nodeId)).toEqual({ succeeded: before.succeeded + 1, failed: before.failed });
    expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([]);
    expect(pair.b.gw.fleet.hub.openJobs()).toEqual([]); // B only relayed it
    expect(await pair.a.gw.database.db.selectFrom('fleet_messages').select('id').execute()).toEqual([]); // read and deleted
    // Unpinned jobs pick it too (A has no agent of its own).
    expect((await pair.a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['hi'] }, timeoutMs: 20_000 })).nodeId).toBe(agent.nodeId);
  });

  it("a caller's abort on A cancels the job on the node through B", async () => {
    const agent = pair.agents[0]!;
    const finishes = vi.spyOn(pair.b.gw.fleet.hub, 'onFinish');
    const ac = new AbortController();
    const { job } = await pair.waitingJob(agent.nodeId, { ms: 30_000, say: 'started' }, { timeoutMs: 60_000, signal: ac.signal });
    const jobId = pair.a.gw.fleet.hub.openJobs()[0]!.jobId;
    expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([{ jobId, nodeId: agent.nodeId, origin: pair.a.gw.database.processId }]);
    ac.abort();
    await expectApiError(job, 409, 'conflict');
    expect(await pair.jobRow(jobId)).toMatchObject({ status: 'canceled', error: 'caller went away' });
    const report = await until('the node reports the job stopped', async () => finishes.mock.calls.map(([, f]) => f as JobFinish).find((f) => f.job_id === jobId), 10_000);
    finishes.mockRestore();
    expect(report).toMatchObject({ ok: false, error: 'canceled: caller went away' });
    expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([]);
  });

  it('the node drop rule applies through the holder: back within the grace, the job carries on; gone after output began, A fails it node_lost', async () => {
    const proxy = await tcpProxy(pair.b.url);
    const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId });
    const seen: string[] = [];
    // Carries on: the agent reconnects to B at once (the proxy cut its connection only) and reports the job.
    const { job: kept } = await pair.waitingJob(agent.nodeId, { ms: 2500, say: 'kept' }, { seen });
    proxy.cut();
    expect((await kept).result).toEqual({ waited_ms: 2500 });

    // Lost: the agent cannot come back (the proxy refuses it) within the grace.
    const before = await pair.counts(agent.nodeId);
    const { job: lost } = await pair.waitingJob(agent.nodeId, { ms: 30_000, say: 'lost' }, { timeoutMs: 60_000, seen });
    proxy.block();
    proxy.cut();
    const e = await expectApiError(lost, 502, 'upstream_error');
    expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
    expect(seen).toEqual(['kept', 'lost']);
    expect(await pair.counts(agent.nodeId)).toEqual({ succeeded: before.succeeded, failed: before.failed + 1 }); // the node dropped: it counts
    expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([]);
    await proxy.close();
  });

  it('an agent that moves from the holder to the origin mid-job: the job carries on there', async () => {
    const proxy = await tcpProxy(pair.b.url);
    const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId });
    const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 2500, say: 'moving' });
    proxy.retarget(pair.a.url);
    proxy.cut();
    expect((await job).result).toEqual({ waited_ms: 2500 });
    expect(seen).toEqual(['moving']);
    expect(pair.a.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
    await until('the record names A', async () => (await pair.channelOf(agent.nodeId)).channel_process === pair.a.gw.database.processId);
    // B's late `lost` (its grace ran out) finds nothing to act on.
    await new Promise((r) => setTimeout(r, GRACE_MS + 500));
    expect(pair.a.gw.fleet.hub.openJobs()).toEqual([]);
    expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([]);
    await proxy.close();
  });

  it('an agent that reconnects mid-job to a third process: that process relays the job to A from then on, output after the move included', async () => {
    const c = await pair.third();
    const proxy = await tcpProxy(pair.b.url);
    try {
      const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId });
      const before = await pair.counts(agent.nodeId);
      const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 3000, say: 'before', then: 'after' });
      proxy.retarget(c.url);
      proxy.cut();
      await until('C relays the job', async () => c.gw.fleet.hub.relayedJobs().length === 1);
      expect(c.gw.fleet.hub.relayedJobs()).toEqual([{ jobId: pair.a.gw.fleet.hub.openJobs()[0]!.jobId, nodeId: agent.nodeId, origin: pair.a.gw.database.processId }]);
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 3000 });
      expect(seen).toEqual(['before', 'after']);
      expect(await pair.jobRow(r.jobId)).toMatchObject({ status: 'succeeded', error: null, origin_process: pair.a.gw.database.processId });
      expect(await pair.counts(agent.nodeId)).toEqual({ succeeded: before.succeeded + 1, failed: before.failed });
      expect(c.gw.fleet.hub.relayedJobs()).toEqual([]);
      // B, which held the channel before, forgets the job once the grace ran out; nothing is left open on A.
      await until('B forgot the job', async () => pair.b.gw.fleet.hub.relayedJobs().length === 0, 10_000);
      expect(pair.a.gw.fleet.hub.openJobs()).toEqual([]);
    } finally {
      await proxy.close();
      await c.stop();
    }
  });

  it("a process the agent left without a close reaching it does not write itself back over the agent's later connection; jobs go through that one", async () => {
    const c = await pair.third();
    const proxy = await tcpProxy(pair.b.url);
    try {
      const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId });
      const epochOf = async () => Number((await pair.a.gw.database.db.selectFrom('nodes').select('channel_epoch').where('id', '=', agent.nodeId).executeTakeFirstOrThrow()).channel_epoch);
      const onB = await epochOf();
      proxy.retarget(c.url);
      proxy.strand(); // B's end of the connection stays open and silent: B still thinks it holds the channel
      await until('the record names C', async () => (await pair.channelOf(agent.nodeId)).channel_process === c.gw.database.processId);
      expect(pair.b.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
      expect(await epochOf()).toBeGreaterThan(onB);
      await pair.b.gw.fleet.hub.watch(); // B's periodic reassert of the channels it holds
      expect((await pair.channelOf(agent.nodeId)).channel_process).toBe(c.gw.database.processId);
      const job = await pair.a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['through C'] }, timeoutMs: 10_000, nodeId: agent.nodeId });
      expect(job.result).toEqual({ chunks: 1 });
      // B itself sends the node's jobs through C too, not onto its stranded channel.
      expect(await pair.b.gw.fleet.hub.reachable(agent.nodeId)).toBe(true);
      const picked = await pair.b.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: ['from B'] }, timeoutMs: 10_000, nodeId: agent.nodeId });
      expect(picked.result).toEqual({ chunks: 1 });

      // A job relayed through C; then what B sees of the agent coming back on a later connection whose hello
      // runs before that connection's channel replaced the stranded one there (its node-key lookup took longer):
      // B, which still relays the job, tells A `moved` with the later connection's number, not the stranded one's
      // (A would take it for a late `moved` and keep following C, which the agent left).
      const onC = await epochOf();
      const fromB = vi.spyOn(pair.a.gw.fleet.hub as unknown as { onRelay(from: string, m: RelayMessage): void }, 'onRelay');
      const { job: relayed } = await pair.waitingJob(agent.nodeId, { ms: 2500, say: 'on C' });
      const jobId = pair.a.gw.fleet.hub.openJobs()[0]!.jobId;
      await pair.b.gw.fleet.hub.hello(agent.nodeId, [jobId], onC + 1);
      const moved = await until('A hears from B', async () => fromB.mock.calls.find(([from, m]) => from === pair.b.gw.database.processId && m.t === 'moved')?.[1]);
      fromB.mockRestore();
      expect(moved).toEqual({ t: 'moved', job: jobId, connection: onC + 1 });
      // That connection's channel then replaces the stranded one at B (until it does, B keeps the job in the grace:
      // a connection whose hello came and whose channel never does leaves the job lost, not waiting for its limit).
      const later = pair.b.gw.fleet.hub.attach(agent.nodeId, onC + 1);
      expect((await relayed).result).toEqual({ waited_ms: 2500 });
      pair.b.gw.fleet.hub.detach(later);
    } finally {
      await proxy.close();
      await c.stop();
    }
  });

  it("an agent that moves mid-job from the origin's own channel to another process: the job carries on through that process", async () => {
    const proxy = await tcpProxy(pair.a.url);
    try {
      const agent = await pair.agentOn({ url: proxy.url, processId: pair.a.gw.database.processId });
      const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 2500, say: 'before', then: 'after' });
      proxy.retarget(pair.b.url);
      proxy.cut();
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 2500 });
      expect(seen).toEqual(['before', 'after']);
      expect(await pair.jobRow(r.jobId)).toMatchObject({ status: 'succeeded', error: null });
      expect(pair.b.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
      expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it("a `moved` from an older connection of the agent than the one its job is on (it took longer than the later one's) does not take the job back there", async () => {
    const c = await pair.third();
    const proxy = await tcpProxy(pair.b.url);
    const dx = await openDatabase({ databaseUrl: pair.a.databaseUrl });
    const x = new FleetRelay(dx, () => undefined);
    const toX: RelayMessage[] = [];
    const finishes = vi.spyOn(c.gw.fleet.hub, 'onFinish');
    try {
      await x.start((_from, m) => toX.push(m));
      const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId });
      const onB = Number((await pair.a.gw.database.db.selectFrom('nodes').select('channel_epoch').where('id', '=', agent.nodeId).executeTakeFirstOrThrow()).channel_epoch);
      const ac = new AbortController();
      const { job } = await pair.waitingJob(agent.nodeId, { ms: 30_000, say: 'started' }, { timeoutMs: 60_000, signal: ac.signal });
      const jobId = pair.a.gw.fleet.hub.openJobs()[0]!.jobId;
      proxy.retarget(c.url);
      proxy.cut();
      await until('C relays the job', async () => c.gw.fleet.hub.relayedJobs().length === 1);
      // The `moved` of a process the agent was on before C (its connection numbered as B's was) arrives late.
      await x.send(pair.a.gw.database.processId, { t: 'moved', job: jobId, connection: onB });
      await until('A took the late moved', async () => (await dx.db.selectFrom('fleet_messages').select('id').where('receiver', '=', pair.a.gw.database.processId).execute()).length === 0);
      // A deletes its messages before it handles them: once the read that took it is over, A has handled it.
      await (pair.a.gw.fleet.hub as unknown as { relay: FleetRelay }).relay.drain();
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
    const c = await pair.third();
    try {
      const agent = await pair.agentOn(pair.B());
      const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 2500, say: 'before', then: 'after' });
      const jobId = pair.a.gw.fleet.hub.openJobs()[0]!.jobId;
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
    const proxy = await tcpProxy(pair.b.url);
    try {
      const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId });
      const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 3000, say: 'before' });
      const jobId = pair.a.gw.fleet.hub.openJobs()[0]!.jobId;
      proxy.retarget(pair.a.url);
      proxy.cut();
      await until('the agent is on A', async () => pair.a.gw.fleet.hub.isConnected(agent.nodeId));
      // What B's relay delivers after the move when it was behind: an output the agent gave B before it left,
      // and one A already has.
      const fromB = (pair.b.gw.fleet.hub as unknown as { relay: FleetRelay }).relay;
      await fromB.send(pair.a.gw.database.processId, { t: 'output', job: jobId, o: { job_id: jobId, seq: 0, stream: 'data', data: 'before' } });
      await fromB.send(pair.a.gw.database.processId, { t: 'output', job: jobId, o: { job_id: jobId, seq: 1, stream: 'data', data: 'late from B' } });
      expect((await job).result).toEqual({ waited_ms: 3000 });
      expect(seen).toEqual(['before', 'late from B']);
    } finally {
      await proxy.close();
    }
  });
});
