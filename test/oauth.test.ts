import { execFileSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as oauth from 'oauth4webapi';
import { chromium } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * The OAuth 2.1 authorization server for connectors, driven end to end by oauth4webapi (an independent,
 * certified client library): discovery, dynamic registration, authorization with PKCE S256, consent with a
 * SIWE session, code exchange, the access token on key routes, refresh rotation with its grace window,
 * replays, revocation and consents; a client identified by a metadata document; the consent page in Chromium.
 */
let t: TestGateway;
let user: Awaited<ReturnType<TestGateway['signIn']>>;
let as: oauth.AuthorizationServer;
let app: Server; // the connector's side: its loopback callback and its client metadata document
let appUrl: string;
let metadataDocument: Record<string, unknown> = {};

const insecure = { [oauth.allowInsecureRequests]: true } as const; // the test gateway is plain http on loopback
const none = oauth.None();

beforeAll(async () => {
  t = await startTestGateway();
  user = await t.signIn();
  await t.gw.services.metering.credit(user.accountId, 10_000_000, 'grant', `oauth-${user.accountId}`);
  app = createServer((req, res) => {
    if (req.url === '/client.json') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(metadataDocument));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html' }).end('<p>connector callback</p>');
  });
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
  const issuer = new URL(t.url);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
});
afterAll(async () => {
  await new Promise((r) => app?.close(r));
  await t?.close();
});

const redirectUri = () => `${appUrl}/callback`;
const count = async (table: 'oauth_requests' | 'oauth_codes' | 'oauth_families' | 'oauth_refresh_tokens' | 'oauth_access_tokens' | 'oauth_consents' | 'oauth_clients') =>
  Number((await t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

async function register(metadata: Record<string, unknown> = {}): Promise<oauth.Client> {
  const res = await oauth.dynamicClientRegistrationRequest(as, { redirect_uris: [redirectUri()], token_endpoint_auth_method: 'none', client_name: 'Test Connector', ...metadata }, insecure);
  return oauth.processDynamicClientRegistrationResponse(res);
}

/** The authorization URL a connector sends the browser to, with a fresh PKCE verifier and state. */
async function authorizationUrl(client: oauth.Client, extra: Record<string, string> = {}) {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint!);
  url.search = new URLSearchParams({
    client_id: client.client_id,
    redirect_uri: redirectUri(),
    response_type: 'code',
    scope: 'billing proofs',
    state,
    code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    resource: `${t.url}/v1/mcp`,
    ...extra,
  }).toString();
  return { url, verifier, state };
}

const authorizeRaw = (url: URL | string) => fetch(url, { redirect: 'manual' });

/** Authorize, approve on the consent page's behalf with the session, and check the callback like a connector. */
async function authorizeAndApprove(client: oauth.Client, extra: Record<string, string> = {}, approve = true) {
  const { url, verifier, state } = await authorizationUrl(client, extra);
  const res = await authorizeRaw(url);
  expect(res.status).toBe(302);
  const consent = new URL(res.headers.get('location')!);
  expect(consent.origin + consent.pathname).toBe(`${t.url}/oauth/consent`);
  const answer = await user.client.request<{ redirect_to: string }>('POST', '/v1/oauth/authorize/approve', { body: { request_id: consent.searchParams.get('request'), approve } });
  const callback = new URL(answer.redirect_to);
  expect(callback.origin + callback.pathname).toBe(redirectUri());
  return { callback, verifier, state };
}

async function exchange(client: oauth.Client, callback: URL, state: string, verifier: string, redirect = redirectUri()) {
  const params = oauth.validateAuthResponse(as, client, callback, state);
  const res = await oauth.authorizationCodeGrantRequest(as, client, none, params, redirect, verifier, insecure);
  return oauth.processAuthorizationCodeResponse(as, client, res);
}

async function connect(client: oauth.Client, extra: Record<string, string> = {}) {
  const { callback, verifier, state } = await authorizeAndApprove(client, extra);
  return exchange(client, callback, state, verifier);
}

const refresh = async (client: oauth.Client, token: string) =>
  oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, none, token, insecure));

/** The RFC 6749 §5.2 refusal oauth4webapi raised. */
async function oauthError(p: Promise<unknown>): Promise<{ error: string; error_description?: string; status: number }> {
  const e = await p.then(
    () => {
      throw new Error('expected an OAuth error response');
    },
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(oauth.ResponseBodyError);
  const r = e as oauth.ResponseBodyError;
  return { error: r.error, error_description: r.error_description, status: r.status };
}

const withToken = (token: string, method: string, path: string, body?: unknown) =>
  fetch(`${t.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
const errorType = async (res: Response) => ((await res.json()) as { error: { type: string } }).error.type;
/** A protocol error body (RFC 6749 §5.2, RFC 7591 §3.2.2). */
const protocolError = async (res: Response) => (await res.json()) as { error: string; error_description: string };

describe('discovery', () => {
  it('publishes RFC 8414 authorization server metadata, which oauth4webapi accepts', () => {
    expect(as).toMatchObject({
      issuer: t.url,
      authorization_endpoint: `${t.url}/v1/oauth/authorize`,
      token_endpoint: `${t.url}/v1/oauth/token`,
      registration_endpoint: `${t.url}/v1/oauth/register`,
      revocation_endpoint: `${t.url}/v1/oauth/revoke`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_methods_supported: ['none'],
      code_challenge_methods_supported: ['S256'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
    });
    expect(as.scopes_supported).toEqual(expect.arrayContaining(['inference', 'billing', 'mcp', 'proofs']));
  });

  it('publishes RFC 9728 protected resource metadata for /v1/mcp at both paths', async () => {
    const a = (await (await fetch(`${t.url}/.well-known/oauth-protected-resource`)).json()) as { scopes_supported: string[] };
    const b: unknown = await (await fetch(`${t.url}/.well-known/oauth-protected-resource/v1/mcp`)).json();
    expect(b).toEqual(a);
    expect(a).toMatchObject({ resource: `${t.url}/v1/mcp`, authorization_servers: [t.url], bearer_methods_supported: ['header'] });
    expect(a.scopes_supported).toContain('mcp');
  });
});

describe('dynamic client registration (RFC 7591)', () => {
  it('registers a public client with a loopback redirect URI and describes it', async () => {
    const client = await register();
    expect(client.client_id).toMatch(/^oauthc_/);
    expect(client).toMatchObject({ token_endpoint_auth_method: 'none', redirect_uris: [redirectUri()], grant_types: ['authorization_code', 'refresh_token'], client_name: 'Test Connector' });
    expect(client.client_secret).toBeUndefined();
    const described = await t.client.request('GET', '/v1/oauth/client', { query: { client_id: client.client_id, redirect_uri: redirectUri() } });
    expect(described).toMatchObject({ client_name: 'Test Connector', redirect_uri_registered: true, metadata_document: false });
    const other = await t.client.request('GET', '/v1/oauth/client', { query: { client_id: client.client_id, redirect_uri: `${appUrl}/elsewhere` } });
    expect(other).toMatchObject({ redirect_uri_registered: false });
    const unknown = await t.client.raw('GET', '/v1/oauth/client', { query: { client_id: 'oauthc_nope' } });
    expect(unknown.status).toBe(404);
    for (const uri of ['https://app.example/cb', 'http://localhost:9/cb', 'http://[::1]:4000/cb']) {
      expect((await register({ redirect_uris: [uri] })).redirect_uris).toEqual([uri]);
    }
  });

  it('refuses a non-loopback http redirect URI with invalid_redirect_uri, and confidential clients, in the RFC 7591 shape', async () => {
    const clients = await count('oauth_clients');
    const post = (body: unknown) => fetch(as.registration_endpoint!, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const bad = await post({ redirect_uris: ['http://app.example/callback'] });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('cache-control')).toBe('no-store');
    const body = await protocolError(bad);
    expect(body).toEqual({ error: 'invalid_redirect_uri', error_description: expect.stringMatching(/loopback/) });
    expect((await protocolError(await post({ redirect_uris: ['myapp:/cb'] }))).error).toBe('invalid_redirect_uri');
    expect((await protocolError(await post({ redirect_uris: ['https://a.example/cb'], token_endpoint_auth_method: 'client_secret_basic' }))).error).toBe('invalid_client_metadata');
    const notJson = await fetch(as.registration_endpoint!, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
    expect(await protocolError(notJson)).toMatchObject({ error: 'invalid_client_metadata' });
    // oauth4webapi sees the same refusal as an OAuth error response.
    expect(await oauthError(register({ redirect_uris: ['http://192.168.0.2/cb'] }))).toMatchObject({ error: 'invalid_redirect_uri', status: 400 });
    expect(await count('oauth_clients')).toBe(clients);
  });
});

describe('authorization endpoint', () => {
  let client: oauth.Client;
  beforeAll(async () => {
    client = await register();
  });

  it('refuses a request without PKCE, or with plain, by redirecting the error to the registered URI; stores nothing', async () => {
    const before = await count('oauth_requests');
    const { url, state } = await authorizationUrl(client);
    const changes: Array<(q: URLSearchParams) => void> = [
      (q) => q.delete('code_challenge'),
      (q) => q.delete('code_challenge_method'), // omitted means plain
      (q) => q.set('code_challenge_method', 'plain'),
    ];
    for (const change of changes) {
      const u = new URL(url);
      change(u.searchParams);
      const res = await authorizeRaw(u);
      expect(res.status).toBe(302);
      const back = new URL(res.headers.get('location')!);
      expect(back.origin + back.pathname).toBe(redirectUri());
      expect(Object.fromEntries(back.searchParams)).toMatchObject({ error: 'invalid_request', state, iss: t.url });
      expect(back.searchParams.get('error_description')).toMatch(/S256|PKCE/);
      // The connector's library reads it as an error response.
      expect(() => oauth.validateAuthResponse(as, client, back, state)).toThrow(oauth.AuthorizationResponseError);
    }
    const badScope = await authorizeRaw((await authorizationUrl(client, { scope: 'billing root' })).url);
    expect(new URL(badScope.headers.get('location')!).searchParams.get('error')).toBe('invalid_scope');
    const badResource = await authorizeRaw((await authorizationUrl(client, { resource: 'https://elsewhere.example/mcp' })).url);
    expect(new URL(badResource.headers.get('location')!).searchParams.get('error')).toBe('invalid_target');
    const token = await authorizeRaw((await authorizationUrl(client, { response_type: 'token' })).url);
    expect(new URL(token.headers.get('location')!).searchParams.get('error')).toBe('unsupported_response_type');
    expect(await count('oauth_requests')).toBe(before);
  });

  it('never redirects to an unregistered redirect URI or for an unknown client: an error page instead', async () => {
    const before = await count('oauth_requests');
    const cases: Array<Record<string, string>> = [
      { redirect_uri: `${appUrl}/other` },
      { redirect_uri: `${redirectUri()}/` }, // exact match only
      { redirect_uri: 'https://attacker.example/cb' },
      { client_id: 'oauthc_unknown' },
      { client_id: 'oauthc_unknown', code_challenge_method: 'plain' },
    ];
    for (const extra of cases) {
      const res = await authorizeRaw((await authorizationUrl(client, extra)).url);
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toMatch(/redirect_uri is not one of|Unknown client_id/);
    }
    const repeated = await authorizeRaw(`${(await authorizationUrl(client)).url}&redirect_uri=${encodeURIComponent('https://attacker.example/cb')}`);
    expect(repeated.status).toBe(400);
    expect(repeated.headers.get('location')).toBeNull();
    expect(await count('oauth_requests')).toBe(before);
  });

  it('a denial goes back to the client as access_denied, and a request is answered once', async () => {
    const { callback, state } = await authorizeAndApprove(client, {}, false);
    expect(Object.fromEntries(callback.searchParams)).toMatchObject({ error: 'access_denied', state, iss: t.url });
    const { url } = await authorizationUrl(client);
    const request = new URL((await authorizeRaw(url)).headers.get('location')!).searchParams.get('request')!;
    await user.client.request('POST', '/v1/oauth/authorize/approve', { body: { request_id: request } });
    const again = await user.client.raw('POST', '/v1/oauth/authorize/approve', { body: { request_id: request } });
    expect(again.status).toBe(404);
    // A pending request lapses after 10 minutes.
    const late = new URL((await authorizeRaw((await authorizationUrl(client)).url)).headers.get('location')!).searchParams.get('request')!;
    t.clock.advance(10 * 60_000);
    expect((await user.client.raw('POST', '/v1/oauth/authorize/approve', { body: { request_id: late } })).status).toBe(404);
    expect((await fetch(`${t.url}/oauth/consent?request=${late}`)).status).toBe(404);
  });

  it('approval with the session cookie must come from the gateway\'s own origin', async () => {
    const { url } = await authorizationUrl(client);
    const request = new URL((await authorizeRaw(url)).headers.get('location')!).searchParams.get('request')!;
    const post = (origin: string) =>
      fetch(`${t.url}/v1/oauth/authorize/approve`, { method: 'POST', headers: { cookie: `svc_session=${user.token}`, origin, 'content-type': 'application/json' }, body: JSON.stringify({ request_id: request }) });
    const forged = await post('https://attacker.example');
    expect(forged.status).toBe(403);
    expect(await errorType(forged)).toBe('csrf_refused');
    expect((await post(t.url)).status).toBe(200);
  });
});

describe('tokens', () => {
  let client: oauth.Client;
  beforeAll(async () => {
    client = await register();
  });

  it('the code grant answers tokens that act as the account on the key routes their scopes cover, metered and receipted', async () => {
    const tokens = await connect(client);
    expect(tokens).toMatchObject({ token_type: 'bearer', expires_in: 3600, scope: 'billing proofs' });
    expect(tokens.access_token).toMatch(/^oat-svc_/);
    expect(tokens.refresh_token).toMatch(/^ort-svc_/);
    // Stored as hashes only.
    const stored = await t.gw.database.db.selectFrom('oauth_access_tokens').select('token_hash').execute();
    expect(stored.some((r) => r.token_hash.includes(tokens.access_token.slice(8, 20)))).toBe(false);

    const credit = await withToken(tokens.access_token, 'GET', '/v1/credit');
    expect(credit.status).toBe(200);
    expect(await credit.json()).toMatchObject({ balance_micro_usd: 10_000_000 });

    const notarized = await withToken(tokens.access_token, 'POST', '/v1/notary/receipts', { input_sha256: 'a'.repeat(64), output_sha256: 'b'.repeat(64) });
    expect(notarized.status).toBe(201);
    expect(notarized.headers.get('x-svc-receipt')).toBeTruthy();
    const receipt = ((await notarized.json()) as { receipt: { payload: Record<string, unknown> } }).receipt.payload;
    const [consent] = await user.client.request<Array<{ id: string; key_id: string; client_id: string; scopes: string[] }>>('GET', '/v1/oauth/consents');
    expect(consent).toMatchObject({ client_id: client.client_id, scopes: ['billing', 'proofs'] });
    expect(receipt).toMatchObject({ account_id: user.accountId, key_id: consent!.key_id });
    const keys = await user.client.listKeys();
    expect(keys.find((k) => k.id === consent!.key_id)).toMatchObject({ name: 'OAuth: Test Connector', scopes: ['billing', 'proofs'], status: 'active' });

    const files = await withToken(tokens.access_token, 'GET', '/v1/files');
    expect(files.status).toBe(403);
    expect(await errorType(files)).toBe('insufficient_scope');
    const session = await withToken(tokens.access_token, 'GET', '/v1/keys');
    expect(session.status).toBe(401);
    expect(await errorType(session)).toBe('wrong_credential_kind');
    expect((await withToken('oat-svc_unknown', 'GET', '/v1/credit')).status).toBe(401);

    // An hour later the access token has expired; the refresh token still works.
    t.clock.advance(3600_000);
    expect((await withToken(tokens.access_token, 'GET', '/v1/credit')).status).toBe(401);
    const next = await refresh(client, tokens.refresh_token!);
    expect((await withToken(next.access_token, 'GET', '/v1/credit')).status).toBe(200);
  });

  it('a code is single use: a replay fails and revokes what the first use minted; wrong verifier or redirect_uri fail and write nothing', async () => {
    const { callback, verifier, state } = await authorizeAndApprove(client);
    const families = await count('oauth_families');
    const wrongVerifier = await oauthError(exchange(client, callback, state, oauth.generateRandomCodeVerifier()));
    expect(wrongVerifier).toMatchObject({ error: 'invalid_grant', status: 400, error_description: expect.stringMatching(/code_verifier/) });
    const wrongRedirect = await oauthError(exchange(client, callback, state, verifier, `${appUrl}/other`));
    expect(wrongRedirect).toMatchObject({ error: 'invalid_grant', error_description: expect.stringMatching(/redirect_uri/) });
    const otherClient = await register();
    const params = oauth.validateAuthResponse(as, client, callback, state);
    const stolen = await oauthError(oauth.processAuthorizationCodeResponse(as, otherClient, await oauth.authorizationCodeGrantRequest(as, otherClient, none, params, redirectUri(), verifier, insecure)));
    expect(stolen.error).toBe('invalid_grant');
    expect(await count('oauth_families')).toBe(families);

    const first = await exchange(client, callback, state, verifier);
    expect((await withToken(first.access_token, 'GET', '/v1/credit')).status).toBe(200);
    const replay = await oauthError(exchange(client, callback, state, verifier));
    expect(replay).toMatchObject({ error: 'invalid_grant', error_description: expect.stringMatching(/already used/) });
    expect((await withToken(first.access_token, 'GET', '/v1/credit')).status).toBe(401);
    expect((await oauthError(refresh(client, first.refresh_token!))).error).toBe('invalid_grant');

    // A code lives 60 seconds.
    const late = await authorizeAndApprove(client);
    t.clock.advance(61_000);
    expect(await oauthError(exchange(client, late.callback, late.state, late.verifier))).toMatchObject({ error: 'invalid_grant', error_description: expect.stringMatching(/expired/) });
  });

  it('refresh tokens rotate; two uses within the 10 s grace window both succeed with one successor; a use after it revokes the family', async () => {
    const start = await connect(client);
    const r1 = await refresh(client, start.refresh_token!);
    expect(r1.refresh_token).not.toBe(start.refresh_token);
    expect(r1.access_token).not.toBe(start.access_token);
    expect(r1.scope).toBe('billing proofs');

    const family = await count('oauth_refresh_tokens');
    const racing = await Promise.all([1, 2, 3, 4].map(() => refresh(client, r1.refresh_token!)));
    const a = racing[0]!;
    for (const b of racing) expect([b.refresh_token, b.access_token]).toEqual([a.refresh_token, a.access_token]);
    expect(a.refresh_token).not.toBe(r1.refresh_token);
    expect(await count('oauth_refresh_tokens')).toBe(family + 1); // rotated once: no second branch
    t.clock.advance(5_000);
    const c = await refresh(client, r1.refresh_token!);
    expect(c.refresh_token).toBe(a.refresh_token);
    expect(c.expires_in).toBeLessThanOrEqual(3600);
    expect((await withToken(a.access_token, 'GET', '/v1/credit')).status).toBe(200);

    // Narrowing the scope on refresh is allowed; widening is not.
    expect(await oauthError(oauth.refreshTokenGrantRequest(as, client, none, a.refresh_token!, { ...insecure, additionalParameters: { scope: 'billing inference' } }).then((r) => oauth.processRefreshTokenResponse(as, client, r)))).toMatchObject({
      error: 'invalid_scope',
    });

    t.clock.advance(6_000); // 11 s after r1 was rotated
    const reused = await oauthError(refresh(client, r1.refresh_token!));
    expect(reused).toMatchObject({ error: 'invalid_grant', error_description: expect.stringMatching(/already used/) });
    expect((await oauthError(refresh(client, a.refresh_token!))).error).toBe('invalid_grant'); // the newest refresh token
    for (const token of [a.access_token, r1.access_token, start.access_token]) expect((await withToken(token, 'GET', '/v1/credit')).status).toBe(401);
  });

  it('takes form-encoded and JSON token requests; refusals are RFC 6749 §5.2 with no-store', async () => {
    const { callback, verifier, state } = await authorizeAndApprove(client);
    const code = callback.searchParams.get('code')!;
    expect(callback.searchParams.get('state')).toBe(state);
    const json = await fetch(as.token_endpoint!, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'authorization_code', code, redirect_uri: redirectUri(), code_verifier: verifier, client_id: client.client_id }),
    });
    expect(json.status).toBe(200);
    expect(json.headers.get('cache-control')).toBe('no-store');
    expect(await json.json()).toMatchObject({ token_type: 'Bearer', scope: 'billing proofs' });
    const form = (body: Record<string, string>) => fetch(as.token_endpoint!, { method: 'POST', body: new URLSearchParams(body) });
    const unsupported = await form({ grant_type: 'client_credentials', client_id: client.client_id });
    expect(unsupported.status).toBe(400);
    expect(unsupported.headers.get('cache-control')).toBe('no-store');
    expect(await protocolError(unsupported)).toEqual({ error: 'unsupported_grant_type', error_description: expect.any(String) });
    expect(await protocolError(await form({ grant_type: 'authorization_code', client_id: client.client_id }))).toMatchObject({ error: 'invalid_request' });
    const unknown = await form({ grant_type: 'refresh_token', client_id: 'oauthc_nobody', refresh_token: 'x' });
    expect(unknown.status).toBe(401);
    expect((await protocolError(unknown)).error).toBe('invalid_client');
    const secret = await form({ grant_type: 'refresh_token', client_id: client.client_id, client_secret: 's', refresh_token: 'x' });
    expect((await protocolError(secret)).error).toBe('invalid_client');
    expect((await protocolError(await form({ grant_type: 'refresh_token', client_id: client.client_id, refresh_token: 'ort-svc_nope' }))).error).toBe('invalid_grant');
  });

  it('revocation (RFC 7009): 200 whatever the token; an access token stops, a refresh token takes its family with it', async () => {
    const revoke = async (token: string, c = client) => oauth.processRevocationResponse(await oauth.revocationRequest(as, c, none, token, insecure));
    const one = await connect(client);
    await revoke(one.access_token);
    expect((await withToken(one.access_token, 'GET', '/v1/credit')).status).toBe(401);
    const next = await refresh(client, one.refresh_token!);
    expect((await withToken(next.access_token, 'GET', '/v1/credit')).status).toBe(200);
    await revoke(next.refresh_token!);
    expect((await withToken(next.access_token, 'GET', '/v1/credit')).status).toBe(401);
    expect((await oauthError(refresh(client, next.refresh_token!))).error).toBe('invalid_grant');
    await revoke('ort-svc_unknown');
    await revoke('anything at all');
    // Another client cannot revoke this client's tokens.
    const two = await connect(client);
    await revoke(two.access_token, await register());
    expect((await withToken(two.access_token, 'GET', '/v1/credit')).status).toBe(200);
  });

  it('consents: the account lists them and revokes one; its tokens stop at once and its key is revoked', async () => {
    const other = await register({ client_name: 'Second Connector' });
    const tokens = await connect(other, { scope: 'billing' });
    const consents = await user.client.request<Array<{ id: string; client_id: string; client_name: string; scopes: string[]; key_id: string }>>('GET', '/v1/oauth/consents');
    const mine = consents.find((c) => c.client_id === other.client_id)!;
    expect(mine).toMatchObject({ client_name: 'Second Connector', scopes: ['billing'] });
    expect(consents.find((c) => c.client_id === client.client_id)).toBeDefined();
    const stranger = await t.signIn();
    expect(await stranger.client.request('GET', '/v1/oauth/consents')).toEqual([]);
    expect((await stranger.client.raw('DELETE', `/v1/oauth/consents/${mine.id}`)).status).toBe(404);

    // Approving more scopes widens the consent onto a new key; the old key is revoked.
    const wider = await connect(other, { scope: 'billing proofs' });
    const widened = (await user.client.request<typeof consents>('GET', '/v1/oauth/consents')).find((c) => c.id === mine.id)!;
    expect(widened.scopes).toEqual(['billing', 'proofs']);
    expect(widened.key_id).not.toBe(mine.key_id);
    expect((await withToken(tokens.access_token, 'GET', '/v1/credit')).status).toBe(200); // an earlier grant acts through the new key

    expect(await user.client.request('DELETE', `/v1/oauth/consents/${mine.id}`)).toEqual({ id: mine.id, revoked: true });
    for (const token of [tokens.access_token, wider.access_token]) expect((await withToken(token, 'GET', '/v1/credit')).status).toBe(401);
    expect((await oauthError(refresh(other, wider.refresh_token!))).error).toBe('invalid_grant');
    expect((await user.client.request<typeof consents>('GET', '/v1/oauth/consents')).map((c) => c.id)).not.toContain(mine.id);
    const keys = await user.client.listKeys();
    expect(keys.find((k) => k.id === widened.key_id)?.status).toBe('revoked');
    expect(keys.find((k) => k.id === mine.key_id)?.status).toBe('revoked');
  });
});

describe('a client identified by its metadata document', () => {
  it('is fetched at authorize time from its URL and runs the whole flow', async () => {
    const clientId = `${appUrl}/client.json`;
    metadataDocument = { client_id: clientId, client_name: 'Document Connector', redirect_uris: [redirectUri()], token_endpoint_auth_method: 'none' };
    const client: oauth.Client = { client_id: clientId, token_endpoint_auth_method: 'none' };
    expect(await t.client.request('GET', '/v1/oauth/client', { query: { client_id: clientId, redirect_uri: redirectUri() } })).toMatchObject({
      client_name: 'Document Connector',
      metadata_document: true,
      redirect_uri_registered: true,
    });
    const tokens = await connect(client, { scope: 'billing' });
    expect((await withToken(tokens.access_token, 'GET', '/v1/credit')).status).toBe(200);
    const consent = (await user.client.request<Array<{ client_id: string; client_name: string }>>('GET', '/v1/oauth/consents')).find((c) => c.client_id === clientId);
    expect(consent?.client_name).toBe('Document Connector');
    expect((await refresh(client, tokens.refresh_token!)).access_token).toMatch(/^oat-svc_/);

    // A document whose client_id is not its own URL is refused, and nothing is redirected.
    metadataDocument = { ...metadataDocument, client_id: 'https://impostor.example/client.json' };
    const res = await authorizeRaw((await authorizationUrl(client)).url);
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(await res.text()).toMatch(/client_id equal to its own URL/);
    // A redirect URI the document does not list is never redirected to.
    metadataDocument = { ...metadataDocument, client_id: clientId };
    const other = await authorizeRaw((await authorizationUrl(client, { redirect_uri: 'https://attacker.example/cb' })).url);
    expect(other.status).toBe(400);
    expect(other.headers.get('location')).toBeNull();
  });
});

describe('the consent page in a real browser', () => {
  it('shows the client and scopes, and approving lands the browser on the redirect URI with code and state', async () => {
    const executablePath = execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
    const browser = await chromium.launch({
      executablePath,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const context = await browser.newContext();
      await context.addCookies([{ name: 'svc_session', value: user.token, url: t.url, httpOnly: true, sameSite: 'Lax' }]);
      const page = await context.newPage();
      const client = await register({ client_name: 'Browser <Connector>' });
      const { url, verifier, state } = await authorizationUrl(client, { scope: 'billing' });
      await page.goto(url.toString());
      expect(new URL(page.url()).pathname).toBe('/oauth/consent');
      await expect.poll(() => page.textContent('h1')).toContain('Browser <Connector>'); // escaped, shown as text
      expect(await page.textContent('ul')).toContain('billing');
      await expect.poll(() => page.textContent('#status')).toMatch(/Signed in as 0x/i);
      await page.click('#approve');
      await page.waitForURL((u) => u.pathname === '/callback');
      const landed = new URL(page.url());
      expect(landed.origin).toBe(appUrl);
      expect(landed.searchParams.get('state')).toBe(state);
      expect(landed.searchParams.get('code')).toMatch(/^oac-svc_/);
      const tokens = await exchange(client, landed, state, verifier);
      expect((await withToken(tokens.access_token, 'GET', '/v1/credit')).status).toBe(200);
      await context.close();
    } finally {
      await browser.close();
    }
  });

  it('a visitor with no session signs in on the page with a browser wallet (SIWE), then approves as that account', async () => {
    const executablePath = execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
    const browser = await chromium.launch({
      executablePath,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    try {
      const wallet = privateKeyToAccount(generatePrivateKey());
      const context = await browser.newContext(); // no cookie: not signed in
      const page = await context.newPage();
      const signed: string[] = [];
      // An EIP-1193 wallet in the page, as an extension injects one: it answers with a lowercase address (as
      // many do) and signs personal_sign requests with the test's key.
      await page.exposeFunction('svcTestWalletSign', async (hex: `0x${string}`) => {
        signed.push(Buffer.from(hex.slice(2), 'hex').toString('utf8'));
        return wallet.signMessage({ message: { raw: hex } });
      });
      await page.addInitScript((address: string) => {
        const w = globalThis as unknown as { ethereum: unknown; svcTestWalletSign(hex: string): Promise<string> };
        w.ethereum = {
          request: async ({ method, params }: { method: string; params?: string[] }) => {
            if (method === 'eth_requestAccounts') return [address.toLowerCase()];
            if (method === 'eth_chainId') return '0x1';
            if (method === 'personal_sign') return w.svcTestWalletSign(params![0]!);
            throw new Error(`unsupported ${method}`);
          },
        };
      }, wallet.address);
      const client = await register({ client_name: 'Wallet Connector' });
      const { url, verifier, state } = await authorizationUrl(client, { scope: 'billing' });
      await page.goto(url.toString());
      await expect.poll(() => page.textContent('#status')).toMatch(/Sign in to this gateway/);
      expect(await page.isDisabled('#approve')).toBe(true);
      expect(await page.isVisible('#sign-in-wallet')).toBe(true);
      expect(await page.isVisible('#sign-in-passkey')).toBe(true); // the test gateway has passkeys configured
      await page.click('#sign-in-wallet');
      await expect.poll(async () => (await page.textContent('#status'))?.toLowerCase()).toContain(`signed in as ${wallet.address.toLowerCase()}`);
      // The message the wallet signed is EIP-4361 for this gateway, with the EIP-55 address.
      expect(signed[0]).toContain(`${new URL(t.url).host} wants you to sign in with your Ethereum account:\n${wallet.address}\n`);
      await page.click('#approve');
      await page.waitForURL((u) => u.pathname === '/callback');
      const landed = new URL(page.url());
      expect(landed.searchParams.get('state')).toBe(state);
      const tokens = await exchange(client, landed, state, verifier);
      // The token acts as the wallet's account (created at its first sign-in), not the suite's user.
      const me = await withToken(tokens.access_token, 'GET', '/v1/credit');
      expect(me.status).toBe(200);
      const [consent] = await t.gw.database.db.selectFrom('oauth_consents').selectAll().where('client_id', '=', client.client_id).execute();
      const account = await t.gw.database.db.selectFrom('wallets').select('account_id').where('address', '=', wallet.address.toLowerCase()).executeTakeFirstOrThrow();
      expect(consent!.account_id).toBe(account.account_id);
      await context.close();
    } finally {
      await browser.close();
    }
  });
});
