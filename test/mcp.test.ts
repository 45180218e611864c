import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import canonicalize from 'canonicalize';
import { verifyMessage } from 'ethers';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { SvcClient } from '@svc/shared/client';
import { ENFORCED_BILLING, fundedKey, startGatewayPair, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { startMcpUpstream, type McpUpstream } from './support/mcp-upstream.ts';
import { connect, post, rpc } from './support/mcp-client.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';

/**
 * MCP end to end with the stock SDK client (Client + StreamableHTTPClientTransport): the remote server at
 * /v1/mcp found through OAuth discovery from its 401 and used with an API key, its tools metered and their
 * receipts verified with ethers; the gateway to a real MCP SDK server (allow list, mcp_call events, the
 * credential kept from the caller); sessions, refusals, and registrations sealed at rest.
 */
const IN = 2_000_000;
const OUT = 5_000_000;
const FUND = 10_000_000;
const CREDENTIAL = 'upstream-secret-credential-0123456789';
const SESSIONS_PER_KEY = 3;
const IDLE_S = 600;
const docker = sandboxImage(SMALL_IMAGE, 'the sandbox tool call');

let t: TestGateway;
let lone: TestGateway; // stateless sessions, private upstream addresses refused (the production default)
let models: TestUpstream;
let stateful: McpUpstream; // answers with SSE streams, sessions on
let stateless: McpUpstream; // answers JSON, no sessions
let user: Awaited<ReturnType<typeof fundedKey>>;
let signer: string;
let agent: TestAgent | undefined;

beforeAll(async () => {
  [models, stateful, stateless] = await Promise.all([startUpstream(), startMcpUpstream({ mode: 'stateful', json: false }), startMcpUpstream({ mode: 'stateless', json: true })]);
  const providers = [{ name: 'local', base_url: models.url, api_key: 'sk-upstream-test', models: [{ id: 'test-chat', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: OUT, max_output_tokens: 1000 }] }];
  [t, lone] = await Promise.all([
    startTestGateway({
      env: { ...ENFORCED_BILLING, SVC_PROVIDERS: JSON.stringify(providers), SVC_MCP_UPSTREAM_TIMEOUT_SECONDS: '1', SVC_MCP_SESSIONS_PER_KEY: String(SESSIONS_PER_KEY), SVC_MCP_SESSION_IDLE_SECONDS: String(IDLE_S), SVC_MCP_DEFAULT_PRICE_MICRO_USD: '250' },
    }),
    startTestGateway({ env: { SVC_MCP_SESSIONS: 'stateless', SVC_WEBHOOK_ALLOW_PRIVATE: 'false' } }),
  ]);
  user = await fundedKey(t, FUND);
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
  if (docker) {
    agent = await enrollAgent(t, user.client, { kinds: ['sandbox'] });
    agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE, SVC_SANDBOX_POOL: '1' });
    await until('agent', async () => t.gw.fleet.hub.isConnected(agent!.nodeId) && (await t.gw.fleet.registry.get(agent!.nodeId)).last_heartbeat_at !== null, 60_000);
  }
}, 120_000);

afterAll(async () => {
  await agent?.kill('SIGTERM');
  await Promise.all([t?.close(), lone?.close(), models?.close(), stateful?.close(), stateless?.close()]);
});

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

type Receipt = { id: string; canonical: string; hash: string; signature: string; signer: string; cost_micro_usd: number };
const receiptOf = (r: { _meta?: Record<string, unknown> }) => r._meta?.['svc/receipt'] as Receipt;

/** The receipt checks out with an independent library: EIP-191 over the canonical text recovers the published signer. */
function expectVerified(r: Receipt): Record<string, any> {
  expect(verifyMessage(r.canonical, r.signature).toLowerCase()).toBe(signer.toLowerCase());
  expect(r.hash).toBe(`0x${sha256(r.canonical)}`);
  const payload = JSON.parse(r.canonical) as Record<string, any>;
  expect(canonicalize(payload)).toBe(r.canonical);
  expect(payload.id).toBe(r.id);
  return payload;
}

const toolsCall = (name: string, args: Record<string, unknown> = {}, id: number | string = 1) => rpc('tools/call', { name, arguments: args }, id);

async function balance(c: SvcClient): Promise<number> {
  return (await c.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance')).balance_micro_usd;
}

async function usageEvents(c: SvcClient, kind: string) {
  return (await c.request<{ events: Array<Record<string, any>> }>('GET', `/v1/usage/events?kind=${kind}&limit=1000`)).events;
}

/** The OAuth side of a stock MCP client: dynamic registration, PKCE; the browser step is the test's. */
class TestOAuthProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  readonly redirectUrl = 'http://127.0.0.1:9/callback'; // a loopback redirect URI (any port, RFC 8252); the test reads the code itself
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: 'MCP SDK test client', redirect_uris: [this.redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(c: OAuthClientInformationMixed) {
    this.client = c;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

describe('the remote MCP server: OAuth discovery from the 401', () => {
  it('answers 401 naming the RFC 9728 document, and a stock client authorizes itself from there', async () => {
    const bare = await post(`${t.url}/v1/mcp`, null, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } }));
    expect(bare.status).toBe(401);
    const metadataUrl = `${t.url}/.well-known/oauth-protected-resource/v1/mcp`;
    expect(bare.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrl}", scope="mcp inference sandboxes"`);
    expect((await (await fetch(metadataUrl)).json()) as object).toMatchObject({ resource: `${t.url}/v1/mcp`, authorization_servers: [t.url] });
    const narrow = (await user.client.createKey({ scopes: ['inference'] })).key;
    const scoped = await post(`${t.url}/v1/mcp`, narrow, rpc('tools/list'));
    expect(scoped.status).toBe(403);
    expect(scoped.headers.get('www-authenticate')).toBe(`Bearer error="insufficient_scope", scope="mcp", resource_metadata="${metadataUrl}"`);
    const expired = await post(`${t.url}/v1/mcp`, 'oat-svc_not-a-token', rpc('tools/list'));
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrl}", scope="mcp inference sandboxes", error="invalid_token"`);
    const gatewayBare = await post(`${t.url}/v1/mcp/servers/mcpsrv_x`, null, rpc('tools/list'));
    expect(gatewayBare.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrl}", scope="mcp"`);

    const provider = new TestOAuthProvider();
    const first = new StreamableHTTPClientTransport(new URL(`${t.url}/v1/mcp`), { authProvider: provider });
    await expect(new Client({ name: 'oauth-test', version: '1' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.client?.client_id).toMatch(/^oauthc_/); // dynamically registered
    const url = provider.authorizationUrl!;
    expect(url.origin + url.pathname).toBe(`${t.url}/v1/oauth/authorize`);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('resource')).toBe(`${t.url}/v1/mcp`);
    expect(url.searchParams.get('scope')).toBe('mcp inference sandboxes'); // the challenge's scopes, not every scope the metadata lists

    // The browser step: authorize, then consent with the user's session (as the consent page does).
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(302);
    const consent = new URL(res.headers.get('location')!);
    const approved = await user.client.request<{ redirect_to: string }>('POST', '/v1/oauth/authorize/approve', { body: { request_id: consent.searchParams.get('request'), approve: true } });
    const code = new URL(approved.redirect_to).searchParams.get('code')!;
    await first.finishAuth(code);
    expect(provider.saved?.access_token).toMatch(/^oat-svc_/);

    const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/v1/mcp`), { authProvider: provider });
    const client = new Client({ name: 'oauth-test', version: '1' });
    await client.connect(transport);
    const r = await client.callTool({ name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 4 } });
    expect(r.isError).toBeFalsy();
    const payload = expectVerified(receiptOf(r));
    expect(payload).toMatchObject({ kind: 'inference', route: 'POST /v1/mcp', account_id: user.accountId, model: 'test-chat' });
    expect(r._meta?.['svc/receipt_id']).toBe(payload.id);
    await client.close();
  });
});

describe('the remote MCP server with an API key', () => {
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  beforeAll(async () => {
    ({ client, transport } = await connect(`${t.url}/v1/mcp`, user.key));
  });
  afterAll(async () => client?.close());

  it('lists its tools, each with an input schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((x) => x.name).sort()).toEqual(['chat', 'run_code', 'verify_receipt']);
    for (const x of tools) expect(x.inputSchema.type).toBe('object');
    expect(tools.find((x) => x.name === 'chat')!.inputSchema.required).toEqual(expect.arrayContaining(['model', 'messages']));
    expect(client.getServerVersion()?.name).toBe('svc-gateway');
  });

  it('chats with a catalog model, metered under the key, and the receipt verifies', async () => {
    const before = await balance(user.client);
    const r = await client.callTool({ name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'say hello' }], max_tokens: 5 } });
    expect(r.isError).toBeFalsy();
    expect((r.content as Array<{ text: string }>)[0]!.text).toBe('Hello there! The quick brown');
    expect(r.structuredContent).toMatchObject({ model: 'test-chat', finish_reason: 'length', usage: { completion_tokens: 5 } });
    expect(models.requests.at(-1)!.authorization).toBe('Bearer sk-upstream-test');
    const rc = receiptOf(r);
    const payload = expectVerified(rc);
    expect(payload).toMatchObject({ kind: 'inference', route: 'POST /v1/mcp', key_id: expect.stringMatching(/^key_/), units: { output_tokens: 5 } });
    expect(await balance(user.client)).toBe(before - payload.cost_micro_usd);
  });

  it('streams a chat answer as progress notifications when asked (SSE)', async () => {
    const pieces: string[] = [];
    const r = await client.callTool({ name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'stream it' }], max_tokens: 3 } }, undefined, {
      onprogress: (p) => void pieces.push(p.message ?? ''),
    });
    expect(pieces.join('')).toBe((r.content as Array<{ text: string }>)[0]!.text);
    expect(pieces.length).toBeGreaterThanOrEqual(3);
    expectVerified(receiptOf(r));
  });

  it('verifies a receipt by id and by payload; the check is itself receipted', async () => {
    const chat = await client.callTool({ name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 } });
    const rc = receiptOf(chat);
    const byId = await client.callTool({ name: 'verify_receipt', arguments: { receipt_id: rc.id } });
    expect(byId.structuredContent).toMatchObject({ valid: true, canonical: true, hash_matches: true, signature_valid: true, receipt_id: rc.id, kind: 'inference' });
    const check = expectVerified(receiptOf(byId));
    expect(check).toMatchObject({ kind: 'mcp_tool', cost_micro_usd: 0, detail: { tool: 'verify_receipt', valid: true } });
    const byPayload = await client.callTool({ name: 'verify_receipt', arguments: { receipt: rc.canonical, signature: rc.signature } });
    expect(byPayload.structuredContent).toMatchObject({ valid: true });
    const tampered = await client.callTool({ name: 'verify_receipt', arguments: { receipt: rc.canonical.replace('"cost_micro_usd":', '"cost_micro_usd":1'), signature: rc.signature } });
    expect(tampered.structuredContent).toMatchObject({ valid: false });
    const foreign = await client.callTool({ name: 'verify_receipt', arguments: { receipt_id: 'req_nothere' } });
    expect(foreign.isError).toBe(true);
    expect(foreign.structuredContent).toMatchObject({ error: { type: 'not_found' } });
  });

  it('a failing call is a tool error, not a transport error; a 402 carries the payment terms', async () => {
    const unknown = await client.callTool({ name: 'chat', arguments: { model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] } });
    expect(unknown.isError).toBe(true);
    expect(unknown.structuredContent).toMatchObject({ error: { type: expect.any(String), message: expect.stringContaining('no-such-model') } });
    const broke = await fundedKey(t, 0);
    const poor = await connect(`${t.url}/v1/mcp`, broke.key);
    const r = await poor.client.callTool({ name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'x' }] } });
    expect(r.isError).toBe(true);
    const err = (r.structuredContent as { error: Record<string, any> }).error;
    expect(err).toMatchObject({ type: 'insufficient_credit', x402Version: 1 });
    expect(err.accepts[0]).toMatchObject({ scheme: 'exact', payTo: ENFORCED_BILLING.SVC_TREASURY_ADDRESS, resource: `${t.url}/v1/mcp` });
    const invalid = await client.callTool({ name: 'chat', arguments: { model: 'test-chat' } });
    expect(invalid.isError).toBe(true);
    await poor.client.close();
    // A scope means the same through MCP: chat needs inference beside mcp.
    const mcpOnly = await connect(`${t.url}/v1/mcp`, (await user.client.createKey({ scopes: ['mcp'] })).key);
    const refused = await mcpOnly.client.callTool({ name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'x' }] } });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ error: { type: 'insufficient_scope', required_scope: 'inference' } });
    expect((await mcpOnly.client.callTool({ name: 'verify_receipt', arguments: { receipt: '{}', signature: '0x00' } })).isError).toBeFalsy();
    await mcpOnly.client.close();
  });

  it('a mandate\'s key is held to its route and model allow lists through the tools too', async () => {
    const parent = await user.client.request<{ id: string }>('POST', '/v1/keys', { body: { name: 'mandate parent' } });
    const mandate = (allowed_routes: string[], allowed_models: string[]) =>
      user.client.request<{ key: string }>('POST', '/v1/mandates', {
        body: { parent_key_id: parent.id, purpose: 'MCP tools', spend_cap_micro_usd: 100_000, expires_at: new Date(t.clock.now().getTime() + 86_400_000).toISOString(), scopes: ['mcp', 'inference'], allowed_models, allowed_routes },
      });
    const ask = { name: 'chat', arguments: { model: 'test-chat', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 } };
    const onlyMcp = await connect(`${t.url}/v1/mcp`, (await mandate(['POST /v1/mcp'], ['test-chat'])).key);
    expect((await onlyMcp.client.callTool(ask)).structuredContent).toMatchObject({ error: { type: 'route_not_allowed' } });
    await onlyMcp.client.close();
    const otherModel = await connect(`${t.url}/v1/mcp`, (await mandate(['POST /v1/mcp', 'POST /v1/chat/completions'], ['another-model'])).key);
    expect((await otherModel.client.callTool(ask)).structuredContent).toMatchObject({ error: { type: 'model_not_allowed' } });
    await otherModel.client.close();
    const allowed = await connect(`${t.url}/v1/mcp`, (await mandate(['POST /v1/mcp', 'POST /v1/chat/completions'], ['test-chat'])).key);
    expect((await allowed.client.callTool(ask)).isError).toBeFalsy();
    await allowed.client.close();
  });

  it.skipIf(!docker)('runs code in a sandbox, metered per second, with the receipt', async () => {
    const streamed: string[] = [];
    const r = await client.callTool({ name: 'run_code', arguments: { language: 'sh', code: 'echo hi; echo oops >&2' } }, undefined, { onprogress: (p) => void streamed.push(p.message ?? '') });
    expect(r.isError).toBeFalsy();
    expect(streamed.sort()).toEqual(['hi\n', 'oops\n']);
    expect(r.structuredContent).toMatchObject({ status: 'succeeded', exit_code: 0, stdout: 'hi\n', stderr: 'oops\n' });
    const payload = expectVerified(receiptOf(r));
    expect(payload).toMatchObject({ kind: 'sandbox', route: 'POST /v1/mcp', detail: { exit_code: 0, network: false } });
    const failed = await client.callTool({ name: 'run_code', arguments: { code: 'exit 3' } });
    expect(failed.isError).toBe(true);
    expect(failed.structuredContent).toMatchObject({ status: 'failed', exit_code: 3 });
  });

  it('keeps a session: initialize answered an Mcp-Session-Id that the client carries', () => {
    expect(transport.sessionId).toMatch(/^mcps_/);
  });
});

describe('sessions of the remote server', () => {
  const initialize = rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } });

  it('refuses an unknown, another key\'s, an ended and an expired session with 404 and a JSON-RPC error', async () => {
    const unknown = await post(`${t.url}/v1/mcp`, user.key, rpc('tools/list'), { 'mcp-session-id': 'mcps_unknown' });
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32001, data: { type: 'not_found' } } });

    const opened = await post(`${t.url}/v1/mcp`, user.key, initialize);
    expect(opened.status).toBe(200);
    const sid = opened.headers.get('mcp-session-id')!;
    expect(sid).toMatch(/^mcps_/);
    expect((await post(`${t.url}/v1/mcp`, user.key, rpc('tools/list'), { 'mcp-session-id': sid })).status).toBe(200);
    const other = await fundedKey(t, 0);
    expect((await post(`${t.url}/v1/mcp`, other.key, rpc('tools/list'), { 'mcp-session-id': sid })).status).toBe(404);

    t.clock.advance((IDLE_S - 1) * 1000);
    expect((await post(`${t.url}/v1/mcp`, user.key, rpc('tools/list'), { 'mcp-session-id': sid })).status).toBe(200); // used: the idle window starts again
    t.clock.advance((IDLE_S - 1) * 1000);
    expect((await post(`${t.url}/v1/mcp`, user.key, rpc('ping'), { 'mcp-session-id': sid })).status).toBe(200);
    t.clock.advance((IDLE_S + 1) * 1000);
    expect((await post(`${t.url}/v1/mcp`, user.key, rpc('ping'), { 'mcp-session-id': sid })).status).toBe(404);

    const again = (await post(`${t.url}/v1/mcp`, user.key, initialize)).headers.get('mcp-session-id')!;
    const end = await fetch(`${t.url}/v1/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${user.key}`, 'mcp-session-id': again } });
    expect(end.status).toBe(200);
    expect((await post(`${t.url}/v1/mcp`, user.key, rpc('ping'), { 'mcp-session-id': again })).status).toBe(404);
  });

  it(`bounds a key to ${SESSIONS_PER_KEY} live sessions: one more ends the least recently used`, async () => {
    const k = await fundedKey(t, 0);
    const ids: string[] = [];
    for (let i = 0; i <= SESSIONS_PER_KEY; i++) {
      ids.push((await post(`${t.url}/v1/mcp`, k.key, initialize)).headers.get('mcp-session-id')!);
      t.clock.advance(1000);
    }
    expect((await post(`${t.url}/v1/mcp`, k.key, rpc('ping'), { 'mcp-session-id': ids[0]! })).status).toBe(404);
    for (const id of ids.slice(1)) expect((await post(`${t.url}/v1/mcp`, k.key, rpc('ping'), { 'mcp-session-id': id })).status).toBe(200);
    const rows = await t.gw.database.db.selectFrom('mcp_sessions').select('id').where('key_id', '=', (await k.client.request<Array<{ id: string }>>('GET', '/v1/keys'))[0]!.id).execute();
    expect(rows.length).toBe(SESSIONS_PER_KEY);
  });

  it('serves a request without a session id statelessly, and a stateless deployment issues none', async () => {
    const direct = await post(`${t.url}/v1/mcp`, user.key, toolsCall('verify_receipt', { receipt: '{}', signature: '0x00' }));
    expect(direct.status).toBe(200);
    expect(direct.headers.get('x-svc-receipt-id')).toBe(direct.json.result._meta['svc/receipt_id']); // a JSON answer carries the receipt headers too
    expect(direct.json).toMatchObject({ jsonrpc: '2.0', id: 1, result: { structuredContent: { valid: false } } });

    const u = await fundedKey(lone, 1_000);
    const { client, transport } = await connect(`${lone.url}/v1/mcp`, u.key);
    expect(transport.sessionId).toBeUndefined();
    const r = await client.callTool({ name: 'verify_receipt', arguments: { receipt: '{}', signature: '0x00' } });
    expect(r.structuredContent).toMatchObject({ valid: false });
    expect(receiptOf(r).id).toMatch(/^req_/);
    const del = await fetch(`${lone.url}/v1/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${u.key}`, 'mcp-session-id': 'x' } });
    expect(del.status).toBe(405);
    await client.close();
  });
});

describe('transport refusals', () => {
  it('malformed JSON-RPC, batches and other methods are JSON-RPC errors, never a 500', async () => {
    for (const path of ['/v1/mcp', '/v1/mcp/servers/mcpsrv_x']) {
      const notJson = await post(`${t.url}${path}`, user.key, '{"jsonrpc": "2.0", ');
      expect(notJson.status).toBe(400);
      expect(notJson.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });
      const batch = await post(`${t.url}${path}`, user.key, JSON.stringify([JSON.parse(rpc('ping')), JSON.parse(rpc('ping', {}, 2))]));
      expect(batch.status).toBe(400);
      expect(batch.json).toMatchObject({ error: { code: -32600, message: expect.stringContaining('batch') } });
      for (const bad of ['{}', '[]', '"x"', '{"jsonrpc":"1.0","id":1,"method":"ping"}', '{"jsonrpc":"2.0","id":{},"method":"ping"}', '{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}']) {
        const r = await post(`${t.url}${path}`, user.key, bad);
        expect({ bad, status: r.status }).toEqual({ bad, status: 400 });
        expect(r.json.error.code).toBe(-32600);
      }
    }
    const get = await fetch(`${t.url}/v1/mcp`, { headers: { authorization: `Bearer ${user.key}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST, DELETE');
    expect(((await get.json()) as any).error.code).toBe(-32000);
    const unknownMethod = await post(`${t.url}/v1/mcp`, user.key, rpc('no/such/method'));
    expect(unknownMethod.json).toMatchObject({ error: { code: -32601 } });
  });
});

describe('the MCP gateway', () => {
  let statefulId: string;
  let statelessId: string;
  const price = 700;

  beforeAll(async () => {
    statefulId = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'stateful', url: stateful.url, credential: CREDENTIAL, allowed_tools: ['echo', 'add', 'fail', 'count'], price_micro_usd_per_call: price } })).id;
    statelessId = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'stateless', url: stateless.url, credential: CREDENTIAL, credential_header: 'X-Api-Key' } })).id;
  });

  it('registrations: sealed at rest, listed with proxy URLs, never returning URL or credential', async () => {
    const list = await user.client.request<{ servers: Array<Record<string, any>>; default_price_micro_usd_per_call: number }>('GET', '/v1/mcp-servers');
    expect(list.default_price_micro_usd_per_call).toBe(250);
    const s = list.servers.find((x) => x.id === statefulId)!;
    expect(s).toMatchObject({ object: 'mcp_server', name: 'stateful', proxy_url: `${t.url}/v1/mcp/servers/${statefulId}`, allowed_tools: ['echo', 'add', 'fail', 'count'], price_micro_usd_per_call: price, price_is_default: false, enabled: true, has_credential: true });
    expect(list.servers.find((x) => x.id === statelessId)).toMatchObject({ price_micro_usd_per_call: 250, price_is_default: true, allowed_tools: null, credential_header: 'x-api-key' });
    const text = JSON.stringify(list);
    expect(text).not.toContain(CREDENTIAL);
    expect(text).not.toContain(stateful.url);
    const rows = await t.gw.database.db.selectFrom('mcp_servers').selectAll().where('account_id', '=', user.accountId).execute();
    expect(rows.length).toBe(2);
    for (const row of rows) {
      const raw = JSON.stringify(row);
      expect(raw).not.toContain(CREDENTIAL);
      expect(raw).not.toContain('127.0.0.1');
      expect(row.url_sealed).toMatch(/^[A-Za-z0-9+/]+=*$/);
      expect(row.credential_sealed).toMatch(/^[A-Za-z0-9+/]+=*$/);
    }
    // A registration of another account is the same 404 everywhere.
    const other = await fundedKey(t, 0);
    const r = await other.client.raw('PATCH', `/v1/mcp-servers/${statefulId}`, { body: { enabled: false } });
    expect(r.status).toBe(404);
    expect((await other.client.raw('POST', `/v1/mcp-servers/${statefulId}/test`)).status).toBe(404);
    const call = await post(`${t.url}/v1/mcp/servers/${statefulId}`, other.key, toolsCall('echo', { text: 'x' }));
    expect(call.status).toBe(404);
    expect(call.json).toMatchObject({ error: { data: { type: 'not_found' } } });
  });

  it('test: initialize and tools/list against the upstream, tool names only', async () => {
    const probe = await user.client.request<{ tools: string[] }>('POST', `/v1/mcp-servers/${statefulId}/test`);
    expect(probe).toEqual({ id: statefulId, object: 'mcp_server.test', tools: ['echo', 'add', 'secret', 'fail', 'count'] });
    expect(stateful.requests.filter((r) => r.rpcMethod === 'initialize').at(-1)!.authorization).toBe(`Bearer ${CREDENTIAL}`);
    const viaHeader = await user.client.request<{ tools: string[] }>('POST', `/v1/mcp-servers/${statelessId}/test`);
    expect(viaHeader.tools).toContain('secret');
    expect(stateless.requests.at(-1)!.apiKey).toBe(CREDENTIAL);
    expect(stateless.requests.at(-1)!.authorization).toBeUndefined();
  });

  for (const mode of ['stateful', 'stateless'] as const) {
    it(`passes a ${mode} session through: tools/list filtered, tools/call metered as mcp_call and receipted`, async () => {
      const up = mode === 'stateful' ? stateful : stateless;
      const id = mode === 'stateful' ? statefulId : statelessId;
      const charge = mode === 'stateful' ? price : 250;
      up.reset();
      const before = await balance(user.client);
      const eventsBefore = (await usageEvents(user.client, 'mcp_call')).length;
      const { client, transport } = await connect(`${t.url}/v1/mcp/servers/${id}`, user.key);
      if (mode === 'stateful') expect(transport.sessionId).toMatch(/^mcpg_/);
      else expect(transport.sessionId).toBeUndefined();
      const { tools } = await client.listTools();
      expect(tools.map((x) => x.name).sort()).toEqual(mode === 'stateful' ? ['add', 'count', 'echo', 'fail'] : ['add', 'count', 'echo', 'fail', 'secret']);
      const args = { a: 2, b: 40 };
      const r = await client.callTool({ name: 'add', arguments: args });
      expect(r.structuredContent).toEqual({ sum: 42 });
      const rc = receiptOf(r);
      const payload = expectVerified(rc);
      const { _meta, ...result } = r as Record<string, unknown>;
      expect(payload).toMatchObject({
        kind: 'mcp_call',
        route: 'POST /v1/mcp/servers/:id',
        cost_micro_usd: charge,
        units: { calls: 1 },
        detail: { server_id: id, tool: 'add', outcome: 'ok', arguments_sha256: sha256(canonicalize(args)!), result_sha256: sha256(canonicalize(result)!), duration_ms: expect.any(Number) },
      });
      expect(JSON.stringify(payload)).not.toContain('"sum"'); // the attestation, never the content
      const failed = await client.callTool({ name: 'fail', arguments: {} });
      expect(failed.isError).toBe(true);
      expect(expectVerified(receiptOf(failed)).detail).toMatchObject({ outcome: 'tool_error', tool: 'fail' });

      // The upstream saw the gateway's credential on every request and never the caller's key.
      expect(up.calls.map((c) => c.tool)).toEqual(['add', 'fail']);
      for (const req of up.requests) {
        if (mode === 'stateful') expect(req.authorization).toBe(`Bearer ${CREDENTIAL}`);
        else expect(req.apiKey).toBe(CREDENTIAL);
        expect(JSON.stringify(req.headers)).not.toContain(user.key);
      }
      // Exactly the price per call, settled as mcp_call usage events.
      expect(await balance(user.client)).toBe(before - 2 * charge);
      const events = await usageEvents(user.client, 'mcp_call');
      expect(events.length - eventsBefore).toBe(2);
      expect(events.slice(0, 2).map((e) => e.cost_micro_usd)).toEqual([charge, charge]);
      await client.close();
    });
  }

  it('refuses a tool outside the allow list before the upstream is dialed, and charges nothing', async () => {
    const { client } = await connect(`${t.url}/v1/mcp/servers/${statefulId}`, user.key);
    stateful.reset();
    const before = await balance(user.client);
    const err = await client.callTool({ name: 'secret', arguments: {} }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(McpError);
    expect((err as McpError).code).toBe(-32602);
    expect(stateful.requests).toEqual([]);
    expect(stateful.calls).toEqual([]);
    expect(await balance(user.client)).toBe(before);
    await client.close();
  });

  it('relays an upstream\'s progress stream and keeps the credential from the caller\'s view', async () => {
    const { client } = await connect(`${t.url}/v1/mcp/servers/${statefulId}`, user.key);
    const progress: number[] = [];
    const r = await client.callTool({ name: 'count', arguments: { n: 3 } }, undefined, { onprogress: (p) => void progress.push(p.progress) });
    expect(progress).toEqual([1, 2, 3]);
    expect((r.content as Array<{ text: string }>)[0]!.text).toBe('counted to 3');
    expectVerified(receiptOf(r));
    await client.close();
    // What the caller's side of a raw exchange carries: neither the credential nor the upstream's session id.
    const init = await post(`${t.url}/v1/mcp/servers/${statefulId}`, user.key, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }));
    const sid = init.headers.get('mcp-session-id')!;
    const upstreamSid = stateful.requests.at(-1)!.sessionId;
    expect(sid.startsWith('mcpg_')).toBe(true);
    const call = await post(`${t.url}/v1/mcp/servers/${statefulId}`, user.key, toolsCall('echo', { text: 'hi' }), { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' });
    expect(call.status).toBe(200);
    expect(call.text).toContain('echo: hi');
    for (const text of [init.text, call.text, JSON.stringify([...init.headers]), JSON.stringify([...call.headers])]) {
      expect(text).not.toContain(CREDENTIAL);
      if (upstreamSid) expect(text).not.toContain(upstreamSid);
    }
  });

  it('refuses an unknown or foreign gateway session with 404', async () => {
    const forged = await post(`${t.url}/v1/mcp/servers/${statefulId}`, user.key, rpc('tools/list'), { 'mcp-session-id': 'mcpg_AAAA' });
    expect(forged.status).toBe(404);
    expect(forged.json).toMatchObject({ error: { code: -32001 } });
    // A session id sealed for one server opens nothing on another.
    const init = await post(`${t.url}/v1/mcp/servers/${statefulId}`, user.key, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }));
    const sid = init.headers.get('mcp-session-id')!;
    const moved = await post(`${t.url}/v1/mcp/servers/${statelessId}`, user.key, rpc('tools/list'), { 'mcp-session-id': sid });
    expect(moved.status).toBe(404);
    // DELETE ends the upstream session; GET offers no server-initiated stream.
    const sessions = stateful.sessions();
    const end = await fetch(`${t.url}/v1/mcp/servers/${statefulId}`, { method: 'DELETE', headers: { authorization: `Bearer ${user.key}`, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' } });
    expect(end.status).toBe(200);
    expect(stateful.sessions()).toBe(sessions - 1);
    expect((await post(`${t.url}/v1/mcp/servers/${statefulId}`, user.key, rpc('tools/list'), { 'mcp-session-id': sid })).status).toBe(404);
    const get = await fetch(`${t.url}/v1/mcp/servers/${statefulId}`, { headers: { authorization: `Bearer ${user.key}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(405);
  });

  it('an unknown tool and an upstream JSON-RPC error are clear errors, and nothing is charged', async () => {
    const { client } = await connect(`${t.url}/v1/mcp/servers/${statelessId}`, user.key);
    await client.listTools();
    stateless.reset();
    const before = await balance(user.client);
    // No allow list: the tools the server lists are admitted; it is asked for them when a name was not seen.
    const unknown = await client.callTool({ name: 'no_such_tool', arguments: {} }).then(() => null, (e: unknown) => e);
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(-32602);
    expect((unknown as McpError).message).toContain('no_such_tool');
    expect(stateless.calls).toEqual([]);
    expect(stateless.requests).toEqual([]); // its tools were listed a moment ago
    t.clock.advance(6_000); // later, a name not seen listed makes the gateway ask again (tools/list), still not the call
    await expect(client.callTool({ name: 'no_such_tool', arguments: {} })).rejects.toThrow(/no_such_tool/);
    expect(stateless.requests.map((r) => r.rpcMethod)).toEqual(['tools/list']);
    expect(stateless.calls).toEqual([]);
    const refusing = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'refusing', url: stateless.refuseUrl, allowed_tools: ['echo'] } })).id;
    const refused = await post(`${t.url}/v1/mcp/servers/${refusing}`, user.key, toolsCall('echo', { text: 'x' }, 'call-9'));
    expect(refused.status).toBe(200);
    expect(refused.json).toEqual({ jsonrpc: '2.0', id: 'call-9', error: { code: -32603, message: 'refused by the upstream' } });
    expect(await balance(user.client)).toBe(before);
    await client.close();
  });

  it('bounds a hanging upstream and refuses garbage; nothing is charged for a call that never ran', async () => {
    const hang = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'hang', url: stateful.hangUrl } })).id;
    const garbage = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'garbage', url: stateful.garbageUrl } })).id;
    const before = await balance(user.client);
    const events = (await usageEvents(user.client, 'mcp_call')).length;
    // Bounded by SVC_MCP_UPSTREAM_TIMEOUT_SECONDS (1 here): the gateway answers the timeout error itself.
    const hung = await post(`${t.url}/v1/mcp/servers/${hang}`, user.key, toolsCall('echo', { text: 'x' }, 7));
    expect(hung.status).toBe(200);
    expect(hung.json).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: -32002, data: { type: 'upstream_timeout' } } });
    const junk = await post(`${t.url}/v1/mcp/servers/${garbage}`, user.key, toolsCall('echo', { text: 'x' }, 8));
    expect(junk.json).toMatchObject({ jsonrpc: '2.0', id: 8, error: { code: -32002, data: { type: 'upstream_error' } } });
    expect(junk.text).not.toContain('127.0.0.1');
    const probe = await user.client.raw('POST', `/v1/mcp-servers/${garbage}/test`);
    expect(probe.status).toBe(502);
    expect(await balance(user.client)).toBe(before);
    expect((await usageEvents(user.client, 'mcp_call')).length).toBe(events);
  });

  it('PATCH edits every field; a disabled server is 404; DELETE destroys URL and credential', async () => {
    const id = (await user.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'edit me', url: stateful.url } })).id;
    const patched = await user.client.request<Record<string, unknown>>('PATCH', `/v1/mcp-servers/${id}`, {
      body: { name: 'edited', url: stateless.url, credential: CREDENTIAL, allowed_tools: ['echo'], price_micro_usd_per_call: 5, enabled: false },
    });
    expect(patched).toMatchObject({ name: 'edited', allowed_tools: ['echo'], price_micro_usd_per_call: 5, enabled: false, has_credential: true });
    const off = await post(`${t.url}/v1/mcp/servers/${id}`, user.key, rpc('tools/list'));
    expect(off.status).toBe(404);
    await user.client.request('PATCH', `/v1/mcp-servers/${id}`, { body: { enabled: true, price_micro_usd_per_call: null, credential: null } });
    const on = await user.client.request<{ servers: Array<Record<string, unknown>> }>('GET', '/v1/mcp-servers');
    expect(on.servers.find((s) => s.id === id)).toMatchObject({ enabled: true, price_is_default: true, has_credential: false });
    const listed = await post(`${t.url}/v1/mcp/servers/${id}`, user.key, rpc('tools/list'));
    expect(listed.text).toContain('"echo"');
    expect(listed.text).not.toContain('"add"');
    const bad = await user.client.raw('PATCH', `/v1/mcp-servers/${id}`, { body: { url: 'ftp://example.com/mcp' } });
    expect(bad.status).toBe(400);

    expect(await user.client.request('DELETE', `/v1/mcp-servers/${id}`)).toEqual({ id, object: 'mcp_server', deleted: true });
    const row = await t.gw.database.db.selectFrom('mcp_servers').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ url_sealed: null, credential_sealed: null, enabled: false });
    expect(row.deleted_at).not.toBeNull();
    expect((await user.client.request<{ servers: Array<{ id: string }> }>('GET', '/v1/mcp-servers')).servers.map((s) => s.id)).not.toContain(id);
    expect((await post(`${t.url}/v1/mcp/servers/${id}`, user.key, rpc('tools/list'))).status).toBe(404);
    expect((await user.client.raw('DELETE', `/v1/mcp-servers/${id}`)).status).toBe(404);
  });

  it('refuses private and loopback upstream URLs where the deployment does not allow them', async () => {
    const u = await lone.signIn();
    for (const url of ['http://127.0.0.1:8080/mcp', 'http://localhost/mcp', 'http://10.0.0.8/mcp', 'http://[::1]/mcp', 'http://169.254.169.254/latest']) {
      const r = await u.client.raw('POST', '/v1/mcp-servers', { body: { name: 'private', url } });
      expect({ url, status: r.status }).toEqual({ url, status: 400 });
      expect(((await r.json()) as { error: { param: string } }).error.param).toBe('url');
    }
    const self = await t.signIn();
    const loop = await self.client.raw('POST', '/v1/mcp-servers', { body: { name: 'itself', url: `${t.url}/v1/mcp` } });
    expect(loop.status).toBe(400);
  });
});

describe.skipIf(TEST_DB_KIND === 'pglite')('MCP across processes (Postgres)', () => {
  it('a session opened on one process is served by another; a registration changed on one is seen by the other at once', async () => {
    const { a, b, close } = await startGatewayPair();
    try {
      const u = await a.signIn();
      const key = (await u.client.createKey()).key;
      const opened = await post(`${a.url}/v1/mcp`, key, rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }));
      const sid = opened.headers.get('mcp-session-id')!;
      expect((await post(`${b.url}/v1/mcp`, key, rpc('tools/list'), { 'mcp-session-id': sid })).status).toBe(200);
      expect((await fetch(`${b.url}/v1/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${key}`, 'mcp-session-id': sid } })).status).toBe(200);
      expect((await post(`${a.url}/v1/mcp`, key, rpc('tools/list'), { 'mcp-session-id': sid })).status).toBe(404);

      const id = (await u.client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'shared', url: stateless.url, allowed_tools: ['echo', 'add'] } })).id;
      const call = (base: string) => post(`${base}/v1/mcp/servers/${id}`, key, toolsCall('add', { a: 1, b: 2 }));
      expect((await call(b.url)).json.result.structuredContent).toEqual({ sum: 3 }); // b now holds the registration in memory
      await u.client.request('PATCH', `/v1/mcp-servers/${id}`, { body: { allowed_tools: ['echo'] } });
      await until('b to hear of the change', async () => (await call(b.url)).json?.error?.code === -32602, 5_000);
      await u.client.request('PATCH', `/v1/mcp-servers/${id}`, { body: { enabled: false } });
      await until('b to hear of the gate', async () => (await call(b.url)).status === 404, 5_000);
    } finally {
      await close();
    }
  });
});
