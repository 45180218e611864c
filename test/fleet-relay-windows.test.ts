import { describe, expect, it } from 'vitest';
import { until } from './support/agent.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { RelayPair } from './support/relay-pair.ts';
import type { TestGateway } from './support/gateway.ts';

/**
 * The holder's side of a channel the agent left without its close reaching the holder (B): the agent says
 * hello on a later connection, at B, before or after that connection's channel attaches there, and the stale
 * channel ends before or after that. Jobs A relayed through B into the stale channel after the hello never
 * reached the agent and are lost at once; jobs the hello named carry on, whatever order B hears of it in.
 * The hub is driven directly (attach, hello, detach, finish as the agent's connections would make them) on a
 * node whose agent was killed. Postgres only (see fleet-relay.test.ts).
 */
describe.skipIf(TEST_DB_KIND === 'pglite')("jobs relayed into a holder's channel the agent left", () => {
  const pair = new RelayPair();

  /**
   * A fresh agent on B, killed (its own channel ends; the node stays eligible, its last heartbeat is recent), then
   * at `at` a channel of connection n, which the agent left without its close reaching that process (numbered
   * after the agent's last hello at B), attached and recorded as that process's.
   */
  async function leftChannel(at: TestGateway) {
    const agent = await pair.agentOn();
    const hubB = pair.b.gw.fleet.hub;
    const heard = await until('B heard the agent say hello', async () => (hubB as unknown as { hellos: Map<string, number> }).hellos.get(agent.nodeId));
    await agent.kill();
    await until('the channel detached at B', async () => !hubB.isConnected(agent.nodeId));
    const n = heard + 10;
    const stale = at.gw.fleet.hub.attach(agent.nodeId, n);
    // The record of connection n itself: B's write of the killed channel's end comes first, and a job dispatched
    // before it landed would find the node held by nobody.
    await until('the record names the process on connection n', async () => {
      const r = await pair.a.gw.database.db.selectFrom('nodes').select(['channel_process', 'channel_epoch']).where('id', '=', agent.nodeId).executeTakeFirstOrThrow();
      return r.channel_process === at.gw.database.processId && Number(r.channel_epoch) === n;
    });
    return { agent, n, stale };
  }

  /** leftChannel at B, and what the tests do with jobs A relays through B onto it. */
  async function staleChannelAtB() {
    const { agent, n, stale } = await leftChannel(pair.b);
    const hubA = pair.a.gw.fleet.hub;
    const hubB = pair.b.gw.fleet.hub;
    const relayedIds = () => hubB.relayedJobs().flatMap((j) => (j.nodeId === agent.nodeId ? [j.jobId] : []));
    return {
      agent,
      hubB,
      n,
      stale,
      relayedIds,
      /** A job dispatched on A to the node, once B pushed it onto its channel. */
      async relay() {
        const before = new Set(relayedIds());
        const job = hubA.dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 60_000, nodeId: agent.nodeId });
        job.catch(() => undefined); // awaited by the test where it matters
        const id = await until('B relays the job', async () => relayedIds().find((j) => !before.has(j)));
        return { job, id };
      },
      /** B's grace timer of a job it relays (set while its channel is away). */
      dropped: (id: string) => (hubB as unknown as { relayed: { jobs: Map<string, { dropped?: NodeJS.Timeout }> } }).relayed.jobs.get(id)?.dropped,
      /** A's grace timer of its job (the holder said the channel dropped). */
      graceAtA: (id: string) => (hubA as unknown as { jobs: { get(id: string): { lostTimer?: NodeJS.Timeout } | undefined } }).jobs.get(id)?.lostTimer,
      /** The job's caller got 502 node_lost. */
      async lost(job: Promise<unknown>) {
        const e = await expectApiError(job, 502, 'upstream_error');
        expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
      },
      /** The agent finishes the job on `connection` (through B) and its caller on A gets the result. */
      async finishes(j: { job: Promise<unknown>; id: string }, connection: number) {
        await hubB.onFinish(agent.nodeId, { job_id: j.id, ok: true, result: { chunks: 1 }, duration_ms: 1 }, connection);
        expect(await j.job).toMatchObject({ jobId: j.id, result: { chunks: 1 } });
      },
    };
  }

  it('the stale channel ends before the later connection attaches: a job relayed into it after the hello is lost at once; the one the hello named waits in the grace (at B and at A) until its connection attaches, then carries on', async () => {
    const s = await staleChannelAtB();
    const named = await s.relay();
    expect(await s.hubB.hello(s.agent.nodeId, [named.id], s.n + 1)).toEqual({ cancelled: [] });
    const sentAfter = await s.relay(); // into n, after the hello on n + 1
    s.hubB.detach(s.stale);
    // It went where nobody was: B tells A it is lost now, not after the grace.
    expect(s.relayedIds()).toEqual([named.id]);
    await s.lost(sentAfter.job);
    expect(s.dropped(named.id)).toBeDefined();
    await until('A waits in the grace', async () => s.graceAtA(named.id));
    const later = s.hubB.attach(s.agent.nodeId, s.n + 1);
    expect(s.dropped(named.id)).toBeUndefined();
    await until('B told A the job is held again (moved)', async () => s.graceAtA(named.id) === undefined);
    await s.finishes(named, s.n + 1);
    s.hubB.detach(later);
  });

  it("a job relayed into the stale channel is lost at the agent's hello on a later connection that does not name it, before that channel ends; the one the hello names carries on", async () => {
    const s = await staleChannelAtB();
    const named = await s.relay();
    const unnamed = await s.relay();
    expect(await s.hubB.hello(s.agent.nodeId, [named.id], s.n + 1)).toEqual({ cancelled: [] });
    expect(s.relayedIds()).toEqual([named.id]); // lost now, not when n's channel ends (up to its keepalive)
    await s.lost(unnamed.job);
    const later = s.hubB.attach(s.agent.nodeId, s.n + 1);
    s.hubB.detach(s.stale); // n's end, after n + 1 replaced it
    await s.finishes(named, s.n + 1);
    s.hubB.detach(later);
  });

  it('the stale channel ends after the later connection replaced it: a job relayed into it after the hello is lost at once; the job on the later connection is left alone', async () => {
    const s = await staleChannelAtB();
    const named = await s.relay();
    expect(await s.hubB.hello(s.agent.nodeId, [named.id], s.n + 1)).toEqual({ cancelled: [] });
    const sentAfter = await s.relay(); // into n, after the hello on n + 1
    const later = s.hubB.attach(s.agent.nodeId, s.n + 1); // replaces n; n's end reaches B after
    s.hubB.detach(s.stale);
    expect(s.relayedIds()).toEqual([named.id]);
    await s.lost(sentAfter.job);
    expect(s.dropped(named.id)).toBeUndefined(); // n's end is nothing to the job on n + 1
    await s.finishes(named, s.n + 1);
    s.hubB.detach(later);
  });

  it("a hello of an earlier connection heard after a later one's does not take a relayed job back to that connection: the job carries on once the later connection attaches", async () => {
    const s = await staleChannelAtB();
    const named = await s.relay();
    // The agent's hello on n + 2, then its hello on n + 1 (sent before, heard after: that connection's node-key
    // lookup took longer), both naming the job.
    expect(await s.hubB.hello(s.agent.nodeId, [named.id], s.n + 2)).toEqual({ cancelled: [] });
    expect(await s.hubB.hello(s.agent.nodeId, [named.id], s.n + 1)).toEqual({ cancelled: [] });
    s.hubB.detach(s.stale); // n ends before n + 2's channel attached: the job waits in the grace
    expect(s.dropped(named.id)).toBeDefined();
    const later = s.hubB.attach(s.agent.nodeId, s.n + 2);
    expect(s.dropped(named.id)).toBeUndefined();
    await s.finishes(named, s.n + 2);
    s.hubB.detach(later);
  });

  it("a job of A's that the agent's hello on a later connection names at B, while B's stale channel ends during B's lookup of the job's origin, is B's to relay once that connection attaches", async () => {
    // At A: connection m, which the agent left without its close reaching A; A's job goes into it.
    const { agent, n: m, stale: atA } = await leftChannel(pair.a);
    const hubA = pair.a.gw.fleet.hub;
    const hubB = pair.b.gw.fleet.hub;
    const job = hubA.dispatch({ kind: 'diag.echo', payload: { chunks: ['x'] }, timeoutMs: 60_000, nodeId: agent.nodeId });
    job.catch(() => undefined);
    const jobId = await until('A sent the job', async () => hubA.openJobs().find((j) => j.nodeId === agent.nodeId)?.jobId);
    // At B: connection m + 10, also left; the agent's hello on m + 11 names A's job; m + 10's end reaches B while
    // B looks up the job's origin (before: B dropped the claim, and a quiet job was lost when A's grace ran out).
    const stale = hubB.attach(agent.nodeId, m + 10);
    const hello = hubB.hello(agent.nodeId, [jobId], m + 11);
    hubB.detach(stale);
    expect(await hello).toEqual({ cancelled: [] });
    expect(hubB.relayedJobs()).toEqual([{ jobId, nodeId: agent.nodeId, origin: pair.a.gw.database.processId }]);
    const later = hubB.attach(agent.nodeId, m + 11);
    await hubB.onFinish(agent.nodeId, { job_id: jobId, ok: true, result: { chunks: 1 }, duration_ms: 1 }, m + 11);
    expect(await job).toMatchObject({ jobId, result: { chunks: 1 } });
    hubB.detach(later);
    hubA.detach(atA);
  });
});
