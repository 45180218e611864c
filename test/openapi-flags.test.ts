import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * Routes behind deployment flags (the keyless assistant, the keyless terminal) and unconfigured groups (admin,
 * metrics, passkeys) are in the OpenAPI document whether or not they are on (spec document 3, Versioning 2):
 * two gateways with every switch the other way round document the same operations, and each such route
 * answers 404 where it is off.
 */

let on: TestGateway; // admin, metrics and passkeys configured (the test default); assistant and terminal off
let flipped: TestGateway; // admin, metrics and passkeys unconfigured; assistant and terminal on
beforeAll(async () => {
  [on, flipped] = await Promise.all([
    startTestGateway(),
    startTestGateway({ env: { SVC_ADMIN_TOKEN: '', SVC_METRICS_TOKEN: '', SVC_PASSKEY_RP_ID: '', SVC_PASSKEY_ORIGIN: '', SVC_ASSISTANT_MODEL: 'assistant', SVC_TERMINAL_ENABLED: 'true' } }),
  ]);
});
afterAll(async () => Promise.all([on?.close(), flipped?.close()]));

type Doc = { paths: Record<string, Record<string, unknown>> };
const operations = async (t: TestGateway) => {
  const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as Doc;
  return Object.entries(doc.paths).flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`)).sort();
};
const send = async (t: TestGateway, route: string) => {
  const [method, path] = route.split(' ') as [string, string];
  const res = await fetch(`${t.url}${path.replace(/\{[a-z_]+\}/g, 'x0')}`, { method, headers: method === 'GET' || method === 'DELETE' ? {} : { 'content-type': 'application/json' }, body: method === 'GET' || method === 'DELETE' ? undefined : '{}' });
  return { status: res.status, text: await res.text() };
};

const FLAGGED = {
  on: ['POST /v1/assistant', 'POST /v1/terminal/run'],
  flipped: [
    'GET /v1/admin/metrics',
    'POST /v1/admin/accounts/suspend',
    'POST /v1/admin/denylist',
    'POST /v1/admin/nodes/enroll',
    'POST /v1/admin/nodes/approve',
    'GET /metrics',
    'POST /v1/auth/passkey/login/options',
    'POST /v1/auth/passkey/login/verify',
    'POST /v1/auth/passkey/register/options',
    'POST /v1/auth/passkey/register/verify',
    'GET /v1/auth/passkeys',
    'PATCH /v1/auth/passkeys/{id}',
    'DELETE /v1/auth/passkeys/{id}',
  ],
};

describe('routes behind deployment flags', () => {
  it('are documented whether or not they are on', async () => {
    const [a, b] = await Promise.all([operations(on), operations(flipped)]);
    expect(a).toEqual(b);
    expect(a).toEqual(expect.arrayContaining([...FLAGGED.on, ...FLAGGED.flipped]));
  });

  it('answer 404 where they are off: the terminal with an empty body, the others as an unknown route', async () => {
    const terminal = await send(on, 'POST /v1/terminal/run');
    expect(terminal).toEqual({ status: 404, text: '' });
    const unknown = JSON.parse((await send(on, 'POST /v1/no-such-route')).text);
    for (const [t, routes] of [[on, ['POST /v1/assistant']], [flipped, FLAGGED.flipped]] as const) {
      for (const route of routes) {
        const r = await send(t, route);
        expect(r.status, route).toBe(404);
        const body = JSON.parse(r.text);
        expect(body.error.type, route).toBe(unknown.error.type);
        expect(body.error.message, route).toMatch(/^Route .* not found$/);
      }
    }
  });

  it('are served where they are on', async () => {
    expect((await send(flipped, 'POST /v1/assistant')).status).toBe(400); // the route validates: messages is required
    expect((await send(on, 'GET /v1/admin/metrics')).status).toBe(401); // mounted: the token is checked
    expect((await send(on, 'GET /metrics')).status).toBe(401);
  });
});
