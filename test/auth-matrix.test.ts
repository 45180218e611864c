import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, ADMIN_TOKEN, METRICS_TOKEN, type TestGateway } from './support/gateway.ts';

/**
 * Every wired route is called with no credential and with each wrong kind of credential; each must be
 * refused before its handler runs. Admin and metrics groups answer 404 where no token is configured.
 */
let t: TestGateway;
let bare: TestGateway;
let session: string;
let apiKey: string;
beforeAll(async () => {
  [t, bare] = await Promise.all([startTestGateway(), startTestGateway({ env: { SVC_ADMIN_TOKEN: '', SVC_METRICS_TOKEN: '' } })]);
  const s = await t.signIn();
  session = s.token;
  apiKey = (await s.client.createKey()).key;
});
afterAll(async () => Promise.all([t?.close(), bare?.close()]));

const fill = (url: string) => url.replace(/:[A-Za-z_]+/g, 'x0').replace(/\*$/, 'f.txt');

async function call(base: string, method: string, url: string, token?: string) {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  const hasBody = !['GET', 'DELETE'].includes(method);
  if (hasBody) headers['content-type'] = 'application/json';
  const res = await fetch(base + fill(url), { method, headers, body: hasBody ? '{}' : undefined });
  const body = (await res.json().catch(() => null)) as { error?: { type: string } } | null;
  return { status: res.status, type: body?.error?.type };
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

  it('literal path segments win over templates', async () => {
    // /v1/receipts/shared/{id} (public) is not /v1/receipts/{id}/share (session): no credential is asked for.
    expect(await call(t.url, 'GET', '/v1/receipts/shared/req_unknown')).toEqual({ status: 404, type: 'not_found' });
    // /v1/keys/delegate is its own route, not /v1/keys/{id} with id "delegate".
    expect((await call(t.url, 'POST', '/v1/keys/delegate', session)).type).toBe('wrong_credential_kind');
  });

  it('public routes answer without credentials', async () => {
    for (const path of ['/', '/healthz', '/v1/status', '/v1/attestation', '/openapi.json', '/v1/auth/capabilities']) {
      expect((await fetch(t.url + path)).status, path).toBe(200);
    }
  });

  it('admin and metrics groups are unmounted (404, same body as an unknown route) without tokens', async () => {
    const unknown = await call(bare.url, 'GET', '/v1/no-such-route');
    expect(unknown.status).toBe(404);
    for (const r of bare.gw.app.routeTable.filter((x) => x.auth === 'admin' || x.auth === 'metrics')) {
      const res = await call(bare.url, r.method, r.url, 'anything-at-all-here');
      expect(res, `${r.method} ${r.url}`).toEqual({ status: 404, type: 'not_found' });
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
