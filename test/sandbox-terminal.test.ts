import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { canonicalize } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { TerminalClient, isRefusal, type Refusal } from './support/terminal-client.ts';

/**
 * The interactive terminal of a sandbox session, driven directly over WebSocket: a real control plane, a real
 * svc-node agent and a real Docker engine (the small busybox image). Keystrokes in, the screen out, resizes and
 * signals, the ends (the shell exits, the caller leaves, idle by the clock), the limit per session, and metering
 * per second as an exec.
 */
const enabled = sandboxImage();
const PRICE = 1000; // micro-USD per second
const IDLE_S = 120;

let t: TestGateway;
let agent: TestAgent;
let api: SvcClient;
let key: string;
let accountId: string;
beforeAll(async () => {
  if (!enabled) return;
  t = await startTestGateway({ env: { SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: String(PRICE), SVC_SANDBOX_TERMINAL_IDLE_SECONDS: String(IDLE_S), SVC_SANDBOX_MEMORY_MB: '64' } });
  const owner = await t.signIn();
  accountId = owner.accountId;
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'terminal-tests');
  key = (await owner.client.createKey({ scopes: ['sandboxes'] })).key;
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key } });
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE });
  await until('sandbox agent connected and heartbeating', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
});

const newSession = () => api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
const exec = (id: string, code: string) => api.request<{ stdout: string }>('POST', `/v1/sandboxes/sessions/${id}/exec`, { body: { code } });
async function terminal(id: string, query: Record<string, number> = {}): Promise<TerminalClient> {
  const c = await TerminalClient.open(t.url, key, id, query);
  if (isRefusal(c)) throw new Error(`terminal refused: ${JSON.stringify(c)}`);
  return c;
}

describe.skipIf(!enabled)('the terminal of a session', () => {
  it('types a command and reads its output, follows a resize, and keeps the shell through ^C; the exit is metered like an exec', async () => {
    const s = await newSession();
    const c = await terminal(s.id, { cols: 80, rows: 24 });
    expect(await c.frame('ready')).toMatchObject({ session_id: s.id, cols: 80, rows: 24, idle_seconds: IDLE_S });

    c.type('echo hello-$((6*7))\r');
    await c.match(/hello-42/);
    c.type("stty size | sed 's/^/SIZE:/'\r");
    expect((await c.match(/SIZE:(\d+) (\d+)/))[0]).toBe('SIZE:24 80');
    c.send({ type: 'resize', cols: 100, rows: 30 });
    // The pty's resize reaches the box through the docker CLI's own resize call, beside the keystrokes: asked
    // again until the box's terminal has the new size.
    await until('the resize reached the box', async () => {
      const from = c.screen.length;
      c.type("stty size | sed 's/^/SIZE:/'\r");
      return (await c.match(/SIZE:(\d+ \d+)/, from))[1] === '30 100';
    });

    // ^C (a keystroke) reaches the program in the sandbox, not the shell: the sleep ends, the shell stays.
    c.type('sleep 30; echo slept-$((1+1))\r');
    await until('the sleep runs', async () => (await exec(s.id, 'ps')).stdout.includes('sleep 30'));
    c.type('\x03');
    c.type('echo after-$((2+3))\r');
    await c.match(/after-5/);
    expect(c.screen).not.toContain('slept-2');
    // The signal frame does the same for a caller without a keyboard.
    c.type('sleep 30; echo slept-$((2+2))\r');
    await until('the second sleep runs', async () => (await exec(s.id, 'ps')).stdout.includes('sleep 30'));
    c.send({ type: 'signal', name: 'INT' });
    c.type('echo again-$((3+4))\r');
    await c.match(/again-7/);
    expect(c.screen).not.toContain('slept-4');

    c.type('exit 3\r');
    const exit = await c.frame('exit');
    expect(await c.closed).toMatchObject({ code: 1000 });
    expect(exit).toMatchObject({ code: 3, reason: 'exited' });
    expect(exit.cost_micro_usd).toBe(Math.max(1, Math.ceil((exit.duration_ms * PRICE) / 1000)));
    expect(verifyMessage(canonicalize(exit.receipt.payload), exit.receipt.signature)).toBe(t.gw.services.signer.address);
    expect(exit.receipt.payload.detail).toMatchObject({ language: 'terminal', reason: 'exited', exit_code: 3, session_id: s.id });

    const event = await t.gw.database.db.selectFrom('usage_events').selectAll().where('receipt_id', '=', exit.receipt.id).executeTakeFirstOrThrow();
    expect(event).toMatchObject({ account_id: accountId, kind: 'sandbox' });
    expect(Number(event.cost_micro_usd)).toBe(exit.cost_micro_usd);
    const record = await t.gw.database.db.selectFrom('sandbox_runs').selectAll().where('receipt_id', '=', exit.receipt.id).executeTakeFirstOrThrow();
    expect(record).toMatchObject({ language: 'terminal', session_id: s.id, exit_code: 3, status: 'failed' });
    const view = await api.request<{ exec_count: number; cost_micro_usd: number }>('GET', `/v1/sandboxes/sessions/${s.id}`);
    expect(view.cost_micro_usd).toBeGreaterThanOrEqual(exit.cost_micro_usd);
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  }, 120_000);

  it('a paste larger than the input window arrives whole', async () => {
    const s = await newSession();
    const c = await terminal(s.id);
    await c.frame('ready');
    const line = 'x'.repeat(99);
    const lines = 2000; // 200 KB: three windows of input
    c.type('stty -echo; cat > /workspace/paste.txt; stty echo\r');
    await until('cat reads', async () => /\bcat\b/.test((await exec(s.id, 'ps -o comm')).stdout));
    const paste = Buffer.from(`${line}\n`.repeat(lines));
    for (let i = 0; i < paste.length; i += 16 * 1024) c.type(paste.subarray(i, i + 16 * 1024)); // frames of 16 KiB, as a terminal reads them
    c.type('\x04');
    c.type('wc -c < /workspace/paste.txt | sed s/^/BYTES:/\r');
    expect((await c.match(/BYTES:\s*(\d+)/))[1]).toBe(String(lines * 100));
    c.ws.close();
    await c.closed;
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  }, 120_000);

  it("the caller's close kills the terminal's programs and is charged for the seconds it was open", async () => {
    const s = await newSession();
    const c = await terminal(s.id);
    await c.frame('ready');
    c.type('sleep 1000\r');
    await until('the sleep runs', async () => (await exec(s.id, 'ps')).stdout.includes('sleep 1000'));
    c.ws.close();
    await until('the terminal ended', async () => t.gw.services.terminals.size === 0);
    await until('the sleep is gone', async () => !(await exec(s.id, 'ps')).stdout.includes('sleep 1000'));
    const record = await until('the terminal recorded', async () =>
      t.gw.database.db.selectFrom('sandbox_runs').selectAll().where('session_id', '=', s.id).where('language', '=', 'terminal').executeTakeFirst(),
    );
    expect(record.cost_micro_usd).toBe(Math.max(1, Math.ceil((record.duration_ms! * PRICE) / 1000)));
    const receipt = await t.gw.database.db.selectFrom('receipts').select('payload').where('id', '=', record.receipt_id!).executeTakeFirstOrThrow();
    expect(JSON.parse(receipt.payload).detail).toMatchObject({ language: 'terminal', reason: 'closed', exit_code: null });
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  }, 120_000);

  it('an idle terminal is closed by the clock; a session has at most two open at once', async () => {
    const s = await newSession();
    const a = await terminal(s.id);
    const b = await terminal(s.id);
    await Promise.all([a.frame('ready'), b.frame('ready')]);
    const third = (await TerminalClient.open(t.url, key, s.id)) as Refusal;
    expect(isRefusal(third)).toBe(true);
    expect(third).toMatchObject({ status: 409, body: { error: { type: 'conflict', reason: 'terminal_limit' } } });

    b.type('echo busy-$((1+1))\r');
    await b.match(/busy-2/);
    t.clock.advance((IDLE_S - 10) * 1000);
    b.type('echo still-$((1+2))\r'); // b is active; a is not
    await b.match(/still-3/);
    t.clock.advance(20_000);
    await t.gw.services.terminals.sweep();
    const exit = await a.frame('exit');
    expect(exit).toMatchObject({ reason: 'idle', code: null });
    expect(await a.closed).toMatchObject({ code: 1000 });
    b.type('echo alive-$((2+2))\r');
    await b.match(/alive-4/);
    // The closed one's place is free again.
    const c = await terminal(s.id);
    await c.frame('ready');
    b.ws.close();
    c.ws.close();
    await Promise.all([b.closed, c.closed]);
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  }, 120_000);

  it("a browser's key comes as a subprotocol: the answer selects svc.terminal, never the key; a wrong key there is refused", async () => {
    const s = await newSession();
    const c = await TerminalClient.open(t.url, key, s.id, {}, 'subprotocol');
    if (isRefusal(c)) throw new Error(`terminal refused: ${JSON.stringify(c)}`);
    expect(c.ws.protocol).toBe('svc.terminal');
    expect(await c.frame('ready')).toMatchObject({ session_id: s.id });
    c.type('echo sub-$((3*5))\r');
    await c.match(/sub-15/);
    c.ws.close();
    await c.closed;
    const wrong = (await TerminalClient.open(t.url, `sk-svc_${'x'.repeat(43)}`, s.id, {}, 'subprotocol')) as Refusal;
    expect(wrong.status).toBe(401);
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
  });

  it('refusals come as HTTP answers before any upgrade: no key, a missing session, a plain GET', async () => {
    const s = await newSession();
    expect(await TerminalClient.open(t.url, null, s.id)).toMatchObject({ status: 401, body: { error: { type: 'authentication_required' } } });
    expect(await TerminalClient.open(t.url, key, 'sbx_missing')).toMatchObject({ status: 404, body: { error: { type: 'not_found' } } });
    const plain = await api.raw('GET', `/v1/sandboxes/sessions/${s.id}/terminal`);
    expect(plain.status).toBe(426);
    expect(((await plain.json()) as Refusal['body']).error?.type).toBe('invalid_request');
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);
    expect(await TerminalClient.open(t.url, key, s.id)).toMatchObject({ status: 409, body: { error: { type: 'conflict' } } });
  });
});
