import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { SvcClient } from '@svc/shared/client';
import { ENFORCED_BILLING, fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startMcpUpstream, type McpUpstream } from './support/mcp-upstream.ts';
import { chatChunk, sse, startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';
import { enrollAgent, until, untilOnline, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { call } from './support/call.ts';
import { connect, post, rpc } from './support/mcp-client.ts';

/**
 * The edges of both MCP routes, with the stock SDK client and a real MCP SDK server upstream: every tools/call
 * is checked before anything is dialed (a notification or a batch is refused), a failed initialize opens no
 * session, neither route can be pointed at the gateway itself, both keep the transport's header rules, a NUL
 * in a path is a 400, and money: a call whose caller leaves mid-call is billed with a receipt, and a streamed
 * call refused for money is refused before any stream opens.
 */
const FUND = 10_000_000;
const SESSIONS_PER_KEY = 3;
const MODEL = 'test-chat';
/** The model's own count of its answer's tokens, unlike any estimate of a part of it: a call billed for it ran to its end. */
const OUTPUT_TOKENS = 7;
const docker = sandboxImage();

let t: TestGateway;
let models: ScriptedUpstream;
let up: McpUpstream; // answers JSON, no sessions; its tools include echo and secret (kept off the allow list)
let slowUp: McpUpstream; // the same, and a tool that answers when the test lets it (its own server: first dialed mid-test)
let user: Awaited<ReturnType<typeof fundedKey>>;
let serverId: string;
let signer: string;
let agent: TestAgent | undefined;
/** Client connections of the gateway that closed (a caller that left). */
let closedConnections = 0;

/** What the model and the slow tool wait for before answering (a test holds them mid-call). */
let gate: Promise<void> | null = null;
function hold(): () => void {
  let open!: () => void;
  gate = new Promise<void>((r) => (open = r));
  return () => {
    gate = null;
    open();
  };
}

beforeAll(async () => {
  models = await startScriptedUpstream();
  models.handler = async (_req, body, res) => {
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse(chatChunk(MODEL, 'first ')));
      if (gate) await gate;
      res.end(sse(chatChunk(MODEL, 'second', 'stop')) + sse({ ...chatChunk(MODEL, null), choices: [], usage: { prompt_tokens: 4, completion_tokens: OUTPUT_TOKENS, total_tokens: 4 + OUTPUT_TOKENS } }) + sse('[DONE]'));
      return;
    }
    if (gate) await gate;
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: MODEL, choices: [{ index: 0, message: { role: 'assistant', content: 'first second' }, finish_reason: 'stop' }], usage: { prompt_tokens: 4, completion_tokens: OUTPUT_TOKENS, total_tokens: 4 + OUTPUT_TOKENS } }),
    );
  };
  up = await startMcpUpstream({ mode: 'stateless', json: true });
  slowUp = await startMcpUpstream({
    mode: 'stateless',
    json: true,
    extraTools: (server, calls) =>
      server.registerTool('slow', { description: 'Answers when the test lets it', inputSchema: {} }, async () => {
        calls.push({ tool: 'slow', args: {} });
        if (gate) await gate;
        return { content: [{ type: 'text', text: 'done at last' }] };
      }),
  });
  const providers = [{ name: 'local', base_url: models.url, api_key: 'sk-upstream-test', models: [{ id: MODEL, input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000, max_output_tokens: 1000 }] }];
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_PROVIDERS: JSON.stringify(providers),
      SVC_MCP_SESSIONS_PER_KEY: String(SESSIONS_PER_KEY),
      SVC_MCP_UPSTREAM_TIMEOUT_SECONDS: '5',
      HOST: '0.0.0.0', // on every interface, as a deployment is: this machine's host name reaches it
    },
  });
  t.gw.app.server.on('connection', (socket) => socket.once('close', () => closedConnections++));
  user = await fundedKey(t, FUND);
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
  serverId = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'lenient', url: up.url, credential: 'upstream-credential', allowed_tools: ['echo'], price_micro_usd_per_call: 700 } })).id;
  if (docker) {
    agent = await enrollAgent(t, user.client, { kinds: ['sandbox'] });
    agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
    await untilOnline(t, agent.nodeId);
  }
}, 120_000);

afterAll(async () => {
  await agent?.kill('SIGTERM');
  await Promise.all([t?.close(), models?.close(), up?.close(), slowUp?.close()]);
});

const initialize = rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } });
const balance = async (c: SvcClient) => (await c.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance')).balance_micro_usd;
const usageEvents = async (c: SvcClient, kind: string) => (await c.request<{ events: Array<Record<string, any>> }>('GET', `/v1/usage/events?kind=${kind}&limit=1000`)).events;
/** The stock client goes away mid-call (its POST is aborted), and the gateway has seen a connection of it close. */
async function leave(client: Client): Promise<void> {
  const before = closedConnections;
  await client.close();
  await until('the gateway to see the caller leave', async () => closedConnections > before);
}
/** How a call the test cuts off ended for its caller. */
const outcome = (p: Promise<unknown>) => p.then(() => 'answered', () => 'cut off');
/** The account's first usage event of `kind`, once there is one (it is settled after the caller left). */
const billed = async (c: SvcClient, kind: string) => (await until(`the ${kind} call to be billed`, async () => (await usageEvents(c, kind))[0], 60_000))!;
const sessionsOf = async (accountId: string) => (await t.gw.database.db.selectFrom('mcp_sessions').select('id').where('account_id', '=', accountId).execute()).length;

/** The stored receipt of a usage event, checked against the published signer. */
async function receiptOf(c: SvcClient, receiptId: string): Promise<Record<string, any>> {
  const r = await c.request<{ payload: Record<string, any>; signature: string; canonical: string }>('GET', `/v1/receipts/${receiptId}`);
  expect(verifyMessage(r.canonical, r.signature).toLowerCase()).toBe(signer.toLowerCase());
  return r.payload;
}

describe('every tools/call is checked before the upstream is dialed', () => {
  it('a tools/call without an id (a notification) is refused, on or off the allow list, and never reaches the upstream or the meter', async () => {
    up.reset();
    const before = await balance(user.client);
    const events = (await usageEvents(user.client, 'mcp_call')).length;
    for (const name of ['secret', 'echo']) {
      const r = await post(`${t.url}/v1/mcp/servers/${serverId}`, user.key, JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name, arguments: {} } }));
      expect({ name, status: r.status }).toEqual({ name, status: 400 });
      expect(r.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600, data: { type: 'invalid_request' } } });
    }
    // Batches are refused whole (the transport has none), a tools/call inside one as well.
    const batch = await post(`${t.url}/v1/mcp/servers/${serverId}`, user.key, JSON.stringify([{ jsonrpc: '2.0', method: 'tools/call', params: { name: 'secret', arguments: {} } }, JSON.parse(rpc('tools/call', { name: 'secret', arguments: {} }))]));
    expect(batch.status).toBe(400);
    expect(batch.json).toMatchObject({ error: { code: -32600 } });
    expect(up.requests).toEqual([]);
    expect(up.calls).toEqual([]);
    expect(await balance(user.client)).toBe(before);
    expect((await usageEvents(user.client, 'mcp_call')).length).toBe(events);
    // The remote server's rule is the same.
    const remote = await post(`${t.url}/v1/mcp`, user.key, JSON.stringify({ jsonrpc: '2.0', method: 'tools/call', params: { name: 'verify_receipt', arguments: { receipt: '{}', signature: '0x00' } } }));
    expect(remote.status).toBe(400);
    expect(remote.json).toMatchObject({ id: null, error: { code: -32600 } });
  });
});

describe('initialize', () => {
  it('an initialize that fails opens no session and ends none: a missing protocolVersion is -32602 naming it', async () => {
    const k = await fundedKey(t, 0);
    const { client, transport } = await connect(`${t.url}/v1/mcp`, k.key);
    expect(transport.sessionId).toMatch(/^mcps_/);
    for (let i = 0; i <= SESSIONS_PER_KEY; i++) {
      const r = await post(`${t.url}/v1/mcp`, k.key, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { capabilities: {} } }));
      expect(r.status).toBe(200);
      expect(r.headers.get('mcp-session-id')).toBeNull();
      expect(r.json).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: expect.stringContaining('protocolVersion') } });
      expect(r.json.error.message.length).toBeLessThan(300); // one line naming the field, not a validation dump
      t.clock.advance(1000);
    }
    expect(await sessionsOf(k.accountId)).toBe(1);
    await expect(client.ping()).resolves.toEqual({}); // the key's live session is still there
    await client.close();
  });
});

describe('the gateway never reaches itself', () => {
  it('refuses, at connect time, an upstream that names this host: its own /v1/mcp and its own proxy URL; a webhook too', async () => {
    const base = `http://${hostname()}:${new URL(t.url).port}`;
    const k = await fundedKey(t, FUND);
    // Registration resolves nothing (a name may resolve elsewhere by the time it is used); every connection is checked.
    const itself = (await k.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'itself', url: `${base}/v1/mcp`, credential: k.key } })).id;
    const init = await post(`${t.url}/v1/mcp/servers/${itself}`, k.key, initialize);
    expect(init.json).toMatchObject({ error: { code: -32002, data: { type: 'upstream_error' }, message: expect.stringContaining('outbound rules') } });
    expect(await sessionsOf(k.accountId)).toBe(0); // its own /v1/mcp never opened a session for the credential
    const { client: sdk } = await connect(`${t.url}/v1/mcp/servers/${itself}`, k.key).then(
      (c) => ({ client: c.client as Client | null }),
      () => ({ client: null }),
    );
    expect(sdk).toBeNull(); // a stock client cannot initialize through it either

    const loop = (await k.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'loop', url: up.url } })).id;
    await k.client.request('PATCH', `/v1/mcp-servers/${loop}`, { body: { url: `${base}/v1/mcp/servers/${loop}`, credential: k.key } });
    const listed = await post(`${t.url}/v1/mcp/servers/${loop}`, k.key, rpc('tools/list'));
    expect(listed.json).toMatchObject({ error: { code: -32002, data: { type: 'upstream_error' } } }); // refused, not a recursion that times out

    const hook = await call(k.client, 'POST', '/v1/webhooks', { url: `${base}/hooks/in` });
    expect(hook.status).toBe(201);
    expect((await call(k.client, 'POST', `/v1/webhooks/${hook.body.id}/test`)).status).toBeLessThan(300);
    await t.gw.leader.runAllOnce();
    const [attempt] = (await call<any[]>(k.client, 'GET', `/v1/webhooks/${hook.body.id}/deliveries`)).body;
    expect(attempt).toMatchObject({ attempt: 1, status_code: null });
    expect(attempt.error).toMatch(/^refused: .* reaches this gateway itself/);
  });
});

describe('transport rules', () => {
  it('both routes answer 406 for an Accept without both types and 415 for a body that is not application/json, before anything is dialed', async () => {
    up.reset();
    for (const path of ['/v1/mcp', `/v1/mcp/servers/${serverId}`]) {
      const body = rpc('tools/list');
      const accept = await post(`${t.url}${path}`, user.key, body, { accept: 'application/json' });
      expect({ path, status: accept.status }).toEqual({ path, status: 406 });
      expect(accept.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000, message: expect.stringContaining('Not Acceptable') } });
      const type = await post(`${t.url}${path}`, user.key, body, { 'content-type': 'text/plain' });
      expect({ path, status: type.status }).toEqual({ path, status: 415 });
      expect(type.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000, message: expect.stringContaining('Unsupported Media Type') } });
      expect((await post(`${t.url}${path}`, user.key, body, { 'content-type': 'application/json; charset=utf-8' })).status).toBe(200);
    }
    expect(up.requests.map((r) => r.rpcMethod)).toEqual(['tools/list']); // only the acceptable request went on
  });
});

describe('path parameters', () => {
  it('a NUL in a path parameter is a 400 naming it, on every route; in a tool\'s id argument, an input error', async () => {
    const cases: Array<[string, string, string]> = [
      ['DELETE', '/v1/mcp/servers/probe%00x', 'id'],
      ['POST', '/v1/mcp/servers/probe%00x', 'id'],
      ['GET', '/v1/mcp/servers/probe%00x', 'id'],
      ['PATCH', '/v1/mcp-servers/probe%00x', 'id'],
      ['POST', '/v1/mcp-servers/probe%00x/test', 'id'],
      ['GET', '/v1/receipts/req_%00', 'id'],
      ['PUT', '/v1/sandboxes/sessions/sess_x/files/a%00b', 'path'],
    ];
    for (const [method, path, param] of cases) {
      const keyed = path.startsWith('/v1/mcp/') || path.startsWith('/v1/sandboxes/');
      const body = method === 'GET' || method === 'DELETE' ? undefined : method === 'PUT' ? 'x' : keyed ? rpc('tools/list') : '{"enabled":false}';
      const res = await fetch(`${t.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${keyed ? user.key : user.token}`, 'content-type': method === 'PUT' ? 'application/octet-stream' : 'application/json', accept: 'application/json, text/event-stream' },
        ...(body === undefined ? {} : { body }),
      });
      const answer = (await res.json()) as { error: { type: string; param?: string } };
      expect({ method, path, status: res.status, type: answer.error.type, param: answer.error.param }).toEqual({ method, path, status: 400, type: 'invalid_request', param });
    }
    // An id in a tool's arguments is refused by the tool's input schema, not by the database.
    const { client } = await connect(`${t.url}/v1/mcp`, user.key);
    const byId = await client.callTool({ name: 'verify_receipt', arguments: { receipt_id: 'req_\u0000x' } });
    expect(byId.isError).toBe(true);
    expect(JSON.stringify(byId.content)).toContain('NUL');
    await client.close();
  });
});

describe('money: a caller that leaves mid-call pays for what ran', () => {
  it('a chat call on /v1/mcp whose caller disconnects is still billed, with a receipt', async () => {
    const k = await fundedKey(t, FUND);
    const { client } = await connect(`${t.url}/v1/mcp`, k.key);
    const asked = models.seen.length;
    const release = hold();
    const pending = outcome(client.callTool({ name: 'chat', arguments: { model: MODEL, messages: [{ role: 'user', content: 'hello' }] } }));
    await until('the model to be asked', async () => models.seen.length > asked);
    await leave(client); // the caller's HTTP request goes away mid-call
    expect(await pending).toBe('cut off');
    release();
    const event = await billed(k.client, 'inference');
    expect(event).toMatchObject({ route: 'POST /v1/mcp', units: { output_tokens: OUTPUT_TOKENS } });
    expect(event.cost_micro_usd).toBeGreaterThan(0);
    expect(models.seen.at(-1)!.aborted).toBe(false); // the model's answer was taken to its end
    expect(await receiptOf(k.client, event.receipt_id)).toMatchObject({ kind: 'inference', route: 'POST /v1/mcp', cost_micro_usd: event.cost_micro_usd });
    expect(await balance(k.client)).toBe(FUND - event.cost_micro_usd);
  });

  it('a streamed chat call whose caller disconnects after the first piece is billed for the whole answer, with a receipt', async () => {
    const k = await fundedKey(t, FUND);
    const { client } = await connect(`${t.url}/v1/mcp`, k.key);
    const release = hold();
    let first!: () => void;
    const progressed = new Promise<void>((r) => (first = r));
    const pending = outcome(client.callTool({ name: 'chat', arguments: { model: MODEL, messages: [{ role: 'user', content: 'hello' }] } }, undefined, { onprogress: () => first() }));
    await progressed;
    await leave(client);
    expect(await pending).toBe('cut off');
    release();
    const event = await billed(k.client, 'inference');
    expect(event).toMatchObject({ route: 'POST /v1/mcp', units: { output_tokens: OUTPUT_TOKENS } });
    expect(models.seen.at(-1)!.aborted).toBe(false);
    expect(await receiptOf(k.client, event.receipt_id)).toMatchObject({ kind: 'inference', cost_micro_usd: event.cost_micro_usd });
  });

  it.skipIf(!docker)('a streamed run_code call whose caller disconnects mid-run is billed for the run, with a receipt', async () => {
    const k = await fundedKey(t, FUND);
    const { client } = await connect(`${t.url}/v1/mcp`, k.key);
    let started!: () => void;
    const printed = new Promise<void>((r) => (started = r));
    const pending = outcome(client.callTool({ name: 'run_code', arguments: { language: 'sh', code: 'echo start; sleep 2; echo end' } }, undefined, { onprogress: () => started() }));
    await printed;
    await leave(client);
    expect(await pending).toBe('cut off');
    const event = await billed(k.client, 'sandbox');
    expect(event).toMatchObject({ route: 'POST /v1/mcp' });
    expect(Number(event.units.duration_ms)).toBeGreaterThanOrEqual(2000); // the whole program ran: `sleep 2` and after
    const receipt = await receiptOf(k.client, event.receipt_id);
    expect(receipt).toMatchObject({ kind: 'sandbox', cost_micro_usd: event.cost_micro_usd, detail: { exit_code: 0 } });
  });

  it('a gateway tool call whose caller disconnects mid-call is billed at the server\'s price, with a receipt', async () => {
    const k = await fundedKey(t, FUND);
    const mine = (await k.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'slow', url: slowUp.url, allowed_tools: ['slow'], price_micro_usd_per_call: 900 } })).id;
    const { client } = await connect(`${t.url}/v1/mcp/servers/${mine}`, k.key);
    slowUp.reset();
    const release = hold();
    const pending = outcome(client.callTool({ name: 'slow', arguments: {} }));
    await until('the upstream to run the tool', async () => slowUp.calls.length > 0);
    await leave(client);
    expect(await pending).toBe('cut off');
    release();
    const event = await billed(k.client, 'mcp_call');
    expect(event).toMatchObject({ route: 'POST /v1/mcp/servers/:id', cost_micro_usd: 900, units: { calls: 1 } });
    expect(await receiptOf(k.client, event.receipt_id)).toMatchObject({ kind: 'mcp_call', detail: { tool: 'slow', outcome: 'ok', server_id: mine } });
    expect(await balance(k.client)).toBe(FUND - 900);
  });
});

describe('money: a streamed call refused for money', () => {
  it('is refused before any stream opens: a JSON tool result carrying the payment terms, on both routes', async () => {
    const broke = await fundedKey(t, 0);
    const progress = { _meta: { progressToken: 'p1' } };
    for (const args of [
      { name: 'chat', arguments: { model: MODEL, messages: [{ role: 'user', content: 'x' }] } },
      { name: 'run_code', arguments: { language: 'sh', code: 'echo hi' } },
    ]) {
      const r = await post(`${t.url}/v1/mcp`, broke.key, rpc('tools/call', { ...args, ...progress }));
      expect({ tool: args.name, status: r.status, type: r.headers.get('content-type') }).toEqual({ tool: args.name, status: 200, type: expect.stringMatching(/^application\/json/) });
      expect(r.json).toMatchObject({ jsonrpc: '2.0', id: 1, result: { isError: true, structuredContent: { error: { type: 'insufficient_credit', x402Version: 1, accepts: [expect.objectContaining({ scheme: 'exact' })] } } } });
    }
    // A stock client asking for progress gets the same tool error, and no progress.
    const { client } = await connect(`${t.url}/v1/mcp`, broke.key);
    const pieces: unknown[] = [];
    const refused = await client.callTool({ name: 'chat', arguments: { model: MODEL, messages: [{ role: 'user', content: 'x' }] } }, undefined, { onprogress: (p) => void pieces.push(p) });
    expect(refused).toMatchObject({ isError: true, structuredContent: { error: { type: 'insufficient_credit' } } });
    expect(pieces).toEqual([]);
    await client.close();
    // The gateway route: refused before the upstream is dialed, as JSON.
    const theirs = (await broke.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'paid', url: up.url, allowed_tools: ['echo'], price_micro_usd_per_call: 500 } })).id;
    up.reset();
    const g = await post(`${t.url}/v1/mcp/servers/${theirs}`, broke.key, rpc('tools/call', { name: 'echo', arguments: { text: 'x' }, ...progress }));
    expect(g.status).toBe(200);
    expect(g.headers.get('content-type')).toMatch(/^application\/json/);
    expect(g.json).toMatchObject({ result: { isError: true, structuredContent: { error: { type: 'insufficient_credit' } } } });
    expect(up.requests).toEqual([]);
  });
});
