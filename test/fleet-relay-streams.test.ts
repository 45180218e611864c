import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { until, type TestAgent } from './support/agent.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { pausedPost } from './support/http.ts';
import { RELAY_MODEL, RelayPair } from './support/relay-pair.ts';
import { chatChunk, flood, sse, startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';
import { openDatabase } from '../control-plane/src/db/database.ts';
import { FleetRelay, type RelayMessage } from '../control-plane/src/fleet/relay.ts';

/**
 * A node's stream relayed between control-plane processes (the caller on A, the agent's channel on B): the
 * holder relays each message of the agent's outputs in one write, and a caller on A that reads slowly holds
 * the node back through B (`hold`/`go`) instead of the stream piling up on the way. Postgres only.
 */
describe.skipIf(TEST_DB_KIND === 'pglite')('node streams relayed between processes', () => {
  const pair = new RelayPair();
  const LOCAL = 'relay-local';
  let up: ScriptedUpstream;
  let agent: TestAgent;
  let oa: OpenAI;

  beforeAll(async () => {
    up = await startScriptedUpstream();
    agent = await pair.agentOn(pair.B(), { kinds: ['inference'], models: [RELAY_MODEL], model_map: { [RELAY_MODEL]: LOCAL } }, { SVC_INFERENCE_URL: up.url });
    const s = await pair.a.signIn();
    await pair.a.gw.services.metering.credit(s.accountId, 100_000_000, 'grant', `relay-streams-${s.accountId}`);
    oa = new OpenAI({ apiKey: (await s.client.createKey()).key, baseURL: `${pair.a.url}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await up?.close();
  });

  it('a stream of 3,000 chunks arrives whole and in order, in far fewer relay writes than chunks', async () => {
    const N = 3000;
    up.handler = (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let body = '';
      for (let i = 0; i < N; i++) body += sse(chatChunk(LOCAL, `c${i} `));
      res.end(body + sse(chatChunk(LOCAL, null, 'stop')) + sse('[DONE]'));
    };
    const writes = pair.b.gw.fleet.hub.relayWrites;
    let text = '';
    for await (const c of await oa.chat.completions.create({ model: RELAY_MODEL, messages: [{ role: 'user', content: 'count' }], stream: true })) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe(Array.from({ length: N }, (_, i) => `c${i} `).join(''));
    // One write per message of the agent's outputs, not one per output (which took 3,000 writes, one after another).
    expect(pair.b.gw.fleet.hub.relayWrites - writes).toBeLessThan(N / 10);
  });

  it("a caller on A that reads nothing holds back the node whose channel B holds: its local server stops early", async () => {
    up.seen.length = 0;
    const piece = 'x'.repeat(100_000);
    const TOTAL = 600; // 60 MB: what is on its way when the hold arrives (the sockets, a message of the agent's at B, two on the agent) is about 20 MB
    let written = 0;
    up.handler = flood(LOCAL, piece, TOTAL, () => written++);
    const { req } = await pausedPost(`${pair.a.url}/v1/chat/completions`, oa.apiKey!, { model: RELAY_MODEL, messages: [{ role: 'user', content: 'flood' }], stream: true });
    await until('the local server held back', async () => {
      const w = written;
      await new Promise((r) => setTimeout(r, 500));
      return written === w && w < TOTAL;
    }, 20_000);
    // Without hold/go, B answers every output message at once and the whole answer piles up in A.
    expect(written).toBeLessThan(TOTAL / 2);
    req.destroy();
    await until('local request aborted', async () => up.seen[0]?.aborted, 10_000);
    expect(agent.nodeId).toBeTruthy();
  });

  it('a job held back that moves on to another process is held back there too', async () => {
    up.seen.length = 0;
    let written = 0;
    up.handler = flood(LOCAL, 'y'.repeat(100_000), 600, () => written++);
    const { req } = await pausedPost(`${pair.a.url}/v1/chat/completions`, oa.apiKey!, { model: RELAY_MODEL, messages: [{ role: 'user', content: 'flood' }], stream: true });
    const dx = await openDatabase({ databaseUrl: pair.a.databaseUrl });
    const x = new FleetRelay(dx, () => undefined);
    const toX: RelayMessage[] = [];
    try {
      await x.start((_from, m) => toX.push(m));
      await until('the local server held back', async () => {
        const w = written;
        await new Promise((r) => setTimeout(r, 500));
        return written === w && w < 600;
      }, 20_000);
      const jobId = pair.a.gw.fleet.hub.openJobs()[0]!.jobId;
      const onB = Number((await pair.a.gw.database.db.selectFrom('nodes').select('channel_epoch').where('id', '=', agent.nodeId).executeTakeFirstOrThrow()).channel_epoch);
      // The agent carries the job on at X now (a later connection of it): X is told to hold it back as B was.
      await x.send(pair.a.gw.database.processId, { t: 'moved', job: jobId, connection: onB + 1 });
      await until('X is told to hold', async () => toX.some((m) => m.t === 'hold' && m.job === jobId), 10_000);
    } finally {
      req.destroy();
      await x.close();
      await dx.close();
    }
  });
});
