import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { until, type TestAgent } from './support/agent.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { RelayPair } from './support/relay-pair.ts';
import { TerminalClient, isRefusal } from './support/terminal-client.ts';

/**
 * A session's terminal opened on one control-plane process (A) while the session's node holds its channel to
 * another (B), on one Postgres database: keystrokes, resizes and signals go A -> B -> agent as relayed job
 * input, the screen comes back B -> A; a caller on A that stops reading holds the terminal's program back
 * through B (the relay's hold and go) instead of the screen piling up on the way. Postgres and Docker only.
 */
const enabled = TEST_DB_KIND === 'postgres' && sandboxImage();

describe.skipIf(!enabled)('a terminal relayed between processes', () => {
  const pair = new RelayPair();
  let agent: TestAgent;
  let key: string;
  let api: SvcClient;

  beforeAll(async () => {
    agent = await pair.agentOn(pair.B(), { kinds: ['sandbox'] }, { SVC_DOCKER_SOCKET: '/var/run/docker.sock', SVC_SANDBOX_IMAGE: SMALL_IMAGE });
    await pair.a.gw.services.metering.credit(pair.owner.accountId, 1_000_000_000, 'grant', `relay-terminal-${pair.owner.accountId}`);
    key = (await pair.owner.client.createKey({ scopes: ['sandboxes'] })).key;
    api = new SvcClient({ baseUrl: pair.a.url, credential: { kind: 'key', token: key } });
  }, 120_000);
  afterAll(async () => {
    await agent?.kill('SIGTERM');
  });

  const exec = (id: string, code: string) => api.request<{ stdout: string }>('POST', `/v1/sandboxes/sessions/${id}/exec`, { body: { code } });

  it('carries keystrokes, a resize, ^C and the exit through the process holding the channel', async () => {
    const s = await api.request<{ id: string; node_id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    expect(s.node_id).toBe(agent.nodeId);
    expect((await pair.channelOf(agent.nodeId)).channel_process).toBe(pair.b.gw.database.processId);
    const c = await TerminalClient.open(pair.a.url, key, s.id, { cols: 80, rows: 24 });
    if (isRefusal(c)) throw new Error(JSON.stringify(c));
    await c.frame('ready');
    // The job is A's, passed to the agent by B.
    const job = pair.a.gw.fleet.hub.openJobs().find((j) => j.kind === 'sandbox.session.terminal');
    expect(job).toBeDefined();
    expect(pair.b.gw.fleet.hub.relayedJobs().map((j) => j.jobId)).toContain(job!.jobId);

    c.type('echo relayed-$((6*7))\r');
    await c.match(/relayed-42/);
    c.send({ type: 'resize', cols: 132, rows: 43 });
    // The pty's resize reaches the box through the docker CLI's own resize call, beside the keystrokes: asked
    // again until the box's terminal has the new size.
    await until('the resize reached the box', async () => {
      const from = c.screen.length;
      c.type("stty size | sed 's/^/SIZE:/'\r");
      return (await c.match(/SIZE:(\d+ \d+)/, from))[1] === '43 132';
    });
    c.type('sleep 30; echo slept-$((1+1))\r');
    await until('the sleep runs', async () => (await exec(s.id, 'ps')).stdout.includes('sleep 30'));
    c.type('\x03');
    c.type('echo after-$((2+3))\r');
    await c.match(/after-5/);
    expect(c.screen).not.toContain('slept-2');
    c.type('exit 7\r');
    expect(await c.frame('exit')).toMatchObject({ code: 7, reason: 'exited' });
    expect(await c.closed).toMatchObject({ code: 1000 });
    expect(pair.b.gw.fleet.hub.relayedJobs()).toEqual([]);
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  }, 120_000);

  it('a caller on A that stops reading holds the program back on the node; reading again lets it go on', async () => {
    const s = await api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    const c = await TerminalClient.open(pair.a.url, key, s.id);
    if (isRefusal(c)) throw new Error(JSON.stringify(c));
    await c.frame('ready');
    const count = async () => Number((await exec(s.id, 'cat /workspace/n 2>/dev/null || echo 0')).stdout.trim());
    c.ws.pause(); // the caller reads nothing more; TCP, then the gateway's buffer, fill up
    const pad = 'y'.repeat(200);
    c.type(`i=0; while :; do i=$((i+1)); echo "$i ${pad}"; [ $((i % 500)) = 0 ] && echo $i > /workspace/n; done\r`);
    // Held back: the program's count stops (it blocks writing to its terminal) well before it could have written much.
    const held = await until('the program held back', async () => {
      const n = await count();
      if (n === 0) return undefined;
      await new Promise((r) => setTimeout(r, 1000));
      return (await count()) === n ? n : undefined;
    }, 60_000);
    expect(held * 200).toBeLessThan(64 * 1024 * 1024);
    c.ws.resume();
    await until('the program goes on', async () => (await count()) > held + 5000, 60_000);
    c.type('\x03');
    c.ws.close();
    await until('the terminal ended', async () => pair.a.gw.services.terminals.size === 0);
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  }, 180_000);
});
