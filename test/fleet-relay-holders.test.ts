import { describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { sql } from 'kysely';
import { RECEIPT_HEADERS } from '@svc/shared';
import { tcpProxy, until } from './support/agent.ts';
import { startChildGateway } from './support/child-gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { RELAY_MODEL, RelayPair } from './support/relay-pair.ts';
import { openDatabase } from '../control-plane/src/db/database.ts';
import { FleetRelay, type RelayMessage } from '../control-plane/src/fleet/relay.ts';

/**
 * Dispatch across control-plane processes on one Postgres (see fleet-relay.test.ts): a holder that shuts down
 * or is killed mid-job (its agent reconnects elsewhere, or not within the grace), the relay transport alone,
 * and inference through the openai SDK served by an agent on another process. Postgres only.
 */
describe.skipIf(TEST_DB_KIND === 'pglite')('dispatch across control-plane processes: holders that go, the relay, inference', () => {
  const pair = new RelayPair();

  it('a holder that shuts down mid-job: its agent reconnects to another process and the job carries on there', async () => {
    const c = await pair.third();
    const proxy = await tcpProxy(c.url);
    try {
      const agent = await pair.agentOn({ url: proxy.url, processId: c.gw.database.processId });
      const before = await pair.counts(agent.nodeId);
      const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 3000, say: 'before', then: 'after' });
      proxy.retarget(pair.b.url);
      await c.stop(); // closes the agent's connection: it dials again, through the proxy, to B
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 3000 });
      expect(seen).toEqual(['before', 'after']);
      expect(await pair.counts(agent.nodeId)).toEqual({ succeeded: before.succeeded + 1, failed: before.failed });
      expect(pair.b.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
    } finally {
      await proxy.close();
      await c.stop();
    }
  });

  it('a holder killed mid-job, its agent not back within the grace: A loses the job without holding it against the node, and stops dispatching through it', async () => {
    const child = await startChildGateway({ dataDir: pair.a.dataDir, databaseUrl: pair.a.databaseUrl });
    try {
      const { agent, holder } = await pair.agentOnOther(child.url); // the child holds its channel
      const before = await pair.counts(agent.nodeId);
      const job = pair.a.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload: { ms: 30_000 }, timeoutMs: 60_000, nodeId: agent.nodeId });
      await until('the child relays the job', async () => pair.a.gw.fleet.hub.openJobs().length === 1 && (await pair.a.gw.database.processesAlive([holder])).has(holder));
      await child.kill();
      await until('the child left the database', async () => !(await pair.a.gw.database.processesAlive([holder])).has(holder));
      await pair.a.gw.fleet.hub.watchRelayed(); // what the watch timer does every few seconds: missing once is not gone
      expect(pair.a.gw.fleet.hub.openJobs()).toHaveLength(1);
      await pair.a.gw.fleet.hub.watchRelayed(); // missing twice in a row is: the grace starts (its agent may reconnect elsewhere)
      // Not back within the grace; lost before output: dispatched once more, but the job is pinned to that node, so it fails as lost.
      const e = await expectApiError(job, 502, 'upstream_error');
      expect(e.body?.error).toMatchObject({ reason: 'node_lost' });
      expect(await pair.counts(agent.nodeId)).toEqual(before); // the relaying process failed, not the node
      expect(pair.a.gw.fleet.hub.openJobs()).toEqual([]);
      // Its record still names the dead process; it is not reachable, and a job for it fails at once.
      expect((await pair.channelOf(agent.nodeId)).channel_process).toBe(holder);
      expect(await pair.a.gw.fleet.hub.reachable(agent.nodeId)).toBe(false);
      await expectApiError(pair.a.gw.fleet.hub.dispatch({ kind: 'diag.echo', payload: { chunks: [] }, timeoutMs: 5000, nodeId: agent.nodeId }), 503, 'no_capacity');
    } finally {
      await child.kill();
    }
  });

  it('a holder killed mid-job whose agent reconnects to another process: the job carries on there', async () => {
    const child = await startChildGateway({ dataDir: pair.a.dataDir, databaseUrl: pair.a.databaseUrl });
    const proxy = await tcpProxy(child.url);
    try {
      const { agent, holder } = await pair.agentOnOther(proxy.url); // the child holds its channel
      const { job, seen } = await pair.waitingJob(agent.nodeId, { ms: 4000, say: 'before', then: 'after' });
      proxy.retarget(pair.b.url);
      await child.kill();
      await until('B relays the job', async () => pair.b.gw.fleet.hub.relayedJobs().length === 1, 10_000);
      await until('the child left the database', async () => !(await pair.a.gw.database.processesAlive([holder])).has(holder));
      await pair.a.gw.fleet.hub.watchRelayed();
      await pair.a.gw.fleet.hub.watchRelayed(); // the dead child no longer holds the job: nothing to lose
      const r = await job;
      expect(r.result).toEqual({ waited_ms: 4000 });
      expect(seen).toEqual(['before', 'after']);
      expect(await pair.jobRow(r.jobId)).toMatchObject({ status: 'succeeded', error: null });
    } finally {
      await proxy.close();
      await child.kill();
    }
  });

  it('the relay alone: messages about one job, sent without waiting, arrive in the order sent, large ones too', async () => {
    const [dx, dy] = await Promise.all([openDatabase({ databaseUrl: pair.a.databaseUrl }), openDatabase({ databaseUrl: pair.a.databaseUrl })]);
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
    expect(await pair.a.gw.database.processesAlive([dy.processId])).toEqual(new Set());
  });

  it('inference: the openai SDK on A, streamed and not, served by a node agent connected to B', async () => {
    const agent = await pair.agentOn(pair.B(), { kinds: ['inference'], models: [RELAY_MODEL], model_map: { [RELAY_MODEL]: 'llama3:8b' } }, { SVC_INFERENCE_URL: pair.up.url });
    const s = await pair.a.signIn();
    await pair.a.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `relay-${s.accountId}`);
    const oa = new OpenAI({ apiKey: (await s.client.createKey()).key, baseURL: `${pair.a.url}/v1`, maxRetries: 0 });
    const { data, response } = await oa.chat.completions.create({ model: RELAY_MODEL, messages: [{ role: 'user', content: 'Say hello' }] }).withResponse();
    expect(pair.up.requests.at(-1)!.body).toMatchObject({ model: 'llama3:8b' });
    expect(data).toMatchObject({ model: RELAY_MODEL, choices: [{ message: { content: pair.up.switches.reply } }], usage: { prompt_tokens: 3, completion_tokens: 11 } });
    expect(response.headers.get(RECEIPT_HEADERS.cost)).toBe(String(3 + 11 * 3));
    let text = '';
    const stream = await oa.chat.completions.create({ model: RELAY_MODEL, messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } });
    let usage: unknown = null;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe(pair.up.switches.reply);
    expect(usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 11 });
    const jobs = await pair.a.gw.database.db.selectFrom('jobs').select(['kind', 'status']).where('node_id', '=', agent.nodeId).orderBy('created_at').execute();
    expect(jobs).toEqual([
      { kind: 'inference.chat', status: 'succeeded' },
      { kind: 'inference.chat', status: 'succeeded' },
    ]);
    await agent.kill(); // the next test's node is the only one serving the model
  });

  it('inference: a completion streamed through the openai SDK carries on, whole and in order, while its agent reconnects to a third process', async () => {
    const c = await pair.third();
    const proxy = await tcpProxy(pair.b.url);
    try {
      const agent = await pair.agentOn({ url: proxy.url, processId: pair.b.gw.database.processId }, { kinds: ['inference'], models: [RELAY_MODEL], model_map: { [RELAY_MODEL]: 'llama3:8b' } }, { SVC_INFERENCE_URL: pair.up.url });
      const s = await pair.a.signIn();
      await pair.a.gw.services.metering.credit(s.accountId, 10_000_000, 'grant', `move-${s.accountId}`);
      const oa = new OpenAI({ apiKey: (await s.client.createKey()).key, baseURL: `${pair.a.url}/v1`, maxRetries: 0 });
      pair.up.switches.chunkDelayMs = 150;
      const stream = await oa.chat.completions.create({ model: RELAY_MODEL, messages: [{ role: 'user', content: 'Say hello' }], stream: true, stream_options: { include_usage: true } });
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
      expect(text).toBe(pair.up.switches.reply);
      expect(usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 11 });
      expect(c.gw.fleet.hub.isConnected(agent.nodeId)).toBe(true);
      const jobs = await pair.a.gw.database.db.selectFrom('jobs').select(['status']).where('node_id', '=', agent.nodeId).execute();
      expect(jobs).toEqual([{ status: 'succeeded' }]);
    } finally {
      pair.up.switches.chunkDelayMs = 0;
      await proxy.close();
      await c.stop();
    }
  });
});
