import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Fastify from 'fastify';
import { SCOPE_NAMES, type Scope } from '@svc/shared';
import { registerAuth } from '../control-plane/src/http/auth.ts';
import type { AuthScheme } from '../control-plane/src/http/auth-types.ts';
import { startTestGateway, ADMIN_TOKEN, METRICS_TOKEN, type TestGateway } from './support/gateway.ts';

/**
 * Every wired route is called with no credential and with each wrong kind of credential; each must be
 * refused before its handler runs. Admin and metrics groups answer 404 where no token is configured.
 */
let t: TestGateway;
let bare: TestGateway;
let session: string;
let apiKey: string;
const lacking = new Map<Scope, string>();
beforeAll(async () => {
  [t, bare] = await Promise.all([startTestGateway(), startTestGateway({ env: { SVC_ADMIN_TOKEN: '', SVC_METRICS_TOKEN: '' } })]);
  const s = await t.signIn();
  session = s.token;
  apiKey = (await s.client.createKey()).key;
  // For each scope, a valid key that holds every other scope.
  for (const scope of SCOPE_NAMES) lacking.set(scope, (await s.client.createKey({ scopes: SCOPE_NAMES.filter((x) => x !== scope) })).key);
});
afterAll(async () => Promise.all([t?.close(), bare?.close()]));

const fill = (url: string) => url.replace(/:[A-Za-z_]+/g, 'x0').replace(/\*$/, 'f.txt');

async function call(base: string, method: string, url: string, token?: string) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  const hasBody = !['GET', 'DELETE'].includes(method);
  if (hasBody) headers['content-type'] = 'application/json';
  const res = await fetch(base + fill(url), { method, headers, body: hasBody ? '{}' : undefined });
  const body = (await res.json().catch(() => null)) as { error?: { type: string; request_id?: string } & Record<string, unknown> } | null;
  return { status: res.status, type: body?.error?.type, body, requestId: res.headers.get('x-request-id') };
}

/** Routes that answer in Anthropic's error shape: the envelope plus "type": "error" at the top. */
const ANTHROPIC_SHAPED = new Set(['/v1/messages']);

/** The error object of a response without its request id (which must be the response's x-request-id). */
function errorOf(res: Awaited<ReturnType<typeof call>>, url = ''): Record<string, unknown> {
  const { request_id, ...rest } = res.body?.error ?? {};
  expect(request_id).toMatch(/^req_/);
  expect(request_id).toBe(res.requestId);
  const { error, ...top } = res.body ?? {};
  expect(error).toBeDefined();
  expect(top, url).toEqual(ANTHROPIC_SHAPED.has(url) ? { type: 'error' } : {});
  return rest;
}

describe('auth matrix over every wired route', () => {
  it('refuses missing and wrong-kind credentials', async () => {
    const routes = t.gw.app.routeTable.filter((r) => !r.hidden);
    const checked: string[] = [];
    for (const r of routes) {
      const name = `${r.method} ${r.url}`;
      const wrong: Record<string, string[]> = {
        key: [session, ADMIN_TOKEN, 'nk-svc_unknown'],
        session: [apiKey, ADMIN_TOKEN, 'nk-svc_unknown'],
        admin: [session, apiKey, METRICS_TOKEN],
        metrics: [session, apiKey, ADMIN_TOKEN],
        node: [session, apiKey, ADMIN_TOKEN, 'nk-svc_unknown'],
      };
      if (!(r.auth in wrong)) continue;
      const none = await call(t.url, r.method, r.url);
      expect(none.status, `${name} without credential`).toBe(401);
      for (const cred of wrong[r.auth]!) {
        const res = await call(t.url, r.method, r.url, cred);
        expect(res.status, `${name} with ${cred.slice(0, 8)}…`).toBe(401);
        expect(['wrong_credential_kind', 'invalid_credential'], name).toContain(res.type);
      }
      checked.push(name);
    }
    expect(checked.length).toBeGreaterThan(15);
  });

  it('refuses, on every key route, a valid key that lacks the route\'s scope (403 insufficient_scope)', async () => {
    const keyRoutes = t.gw.app.routeTable.filter((r) => r.auth === 'key');
    expect(keyRoutes.length).toBeGreaterThan(15);
    const scopes = new Set<string>();
    for (const r of keyRoutes) {
      const name = `${r.method} ${r.url}`;
      expect(SCOPE_NAMES, name).toContain(r.scope);
      const res = await call(t.url, r.method, r.url, lacking.get(r.scope as Scope));
      expect(res.status, name).toBe(403);
      expect(errorOf(res, r.url), name).toEqual({ type: 'insufficient_scope', message: `This API key lacks the "${r.scope}" scope`, required_scope: r.scope });
      scopes.add(r.scope!);
    }
    // The scopes of the groups wired so far each guard at least one route.
    expect([...scopes]).toEqual(expect.arrayContaining(['billing', 'files', 'inference', 'keys:delegate', 'proofs', 'sandboxes']));
  });

  it('refuses to register a route that declares no auth scheme, an unknown one, or a key route without a scope', async () => {
    const app = Fastify();
    registerAuth(app, { resolvers: { apiKey: async () => Promise.reject(new Error('unused')), session: async () => Promise.reject(new Error('unused')) }, adminToken: undefined, metricsToken: undefined, publicOrigin: 'http://127.0.0.1' });
    const handler = async () => 'served';
    expect(() => app.get('/none', handler)).toThrow('route GET /none declares no auth scheme');
    expect(() => app.get('/magic', { config: { auth: 'magic' as AuthScheme } }, handler)).toThrow('route GET /magic declares no auth scheme');
    expect(() => app.post('/unscoped', { config: { auth: 'key' } }, handler)).toThrow('key route POST /unscoped declares no scope');
    app.get('/open', { config: { auth: 'public' } }, handler);
    await app.ready();
    try {
      expect((await app.inject({ method: 'GET', url: '/open' })).body).toBe('served');
      for (const url of ['/none', '/magic']) expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(404);
      expect((await app.inject({ method: 'POST', url: '/unscoped' })).statusCode).toBe(404);
    } finally {
      await app.close();
    }
  });

  it('literal path segments win over templates', async () => {
    // /v1/receipts/shared/{id} (public) is not /v1/receipts/{id}/share (session): no credential is asked for.
    expect(await call(t.url, 'GET', '/v1/receipts/shared/req_unknown')).toMatchObject({ status: 404, type: 'not_found' });
    // /v1/keys/delegate is its own route, not /v1/keys/{id} with id "delegate".
    expect((await call(t.url, 'POST', '/v1/keys/delegate', session)).type).toBe('wrong_credential_kind');
  });

  it('public routes answer without credentials', async () => {
    for (const path of ['/', '/healthz', '/v1/status', '/v1/attestation', '/openapi.json', '/v1/auth/capabilities']) {
      expect((await fetch(t.url + path)).status, path).toBe(200);
    }
  });

  it('admin and metrics groups are unmounted (404, same body as an unknown route) without tokens', async () => {
    const notFound = (method: string, path: string) => ({ type: 'not_found', message: `Route ${method} ${path} not found` });
    const unknown = await call(bare.url, 'POST', '/v1/no-such-route', 'anything-at-all-here');
    expect(unknown.status).toBe(404);
    expect(errorOf(unknown)).toEqual(notFound('POST', '/v1/no-such-route'));
    const groups = bare.gw.app.routeTable.filter((x) => x.auth === 'admin' || x.auth === 'metrics');
    expect(groups.length).toBeGreaterThan(2);
    for (const r of groups) {
      const res = await call(bare.url, r.method, r.url, 'anything-at-all-here');
      expect(res.status, `${r.method} ${r.url}`).toBe(404);
      expect(errorOf(res), `${r.method} ${r.url}`).toEqual(notFound(r.method, fill(r.url)));
    }
    // The documented routes are still in the OpenAPI document.
    const doc = (await (await fetch(`${bare.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/metrics', '/v1/admin/metrics']));
  });

  it('the right tokens open the admin and metrics groups', async () => {
    expect((await call(t.url, 'GET', '/v1/admin/metrics', ADMIN_TOKEN)).status).toBe(200);
    const m = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(m.status).toBe(200);
  });
});
