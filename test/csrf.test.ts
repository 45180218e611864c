import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECEIPT_HEADERS } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * Unsafe requests authenticated by the svc_session cookie must come from the gateway's own origin (Origin,
 * else Sec-Fetch-Site); bearer sessions and safe methods are not checked.
 */
let t: TestGateway;
let own: string;
beforeAll(async () => {
  t = await startTestGateway();
  own = new URL(t.url).origin;
});
afterAll(async () => t?.close());

const EVIL = 'https://evil.example';

/** An account with a key and one receipt; `routes` are the body-less session POSTs a forged page would send. */
async function account() {
  const s = await fundedKey(t, 10_000_000);
  const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: s.key } });
  const notarized = await api.raw('POST', '/v1/notary/receipts', { body: { input_sha256: 'a'.repeat(64), output_sha256: 'b'.repeat(64) } });
  expect(notarized.status).toBe(201);
  const receiptId = notarized.headers.get(RECEIPT_HEADERS.id)!;
  const keyId = (await s.client.request<Array<{ id: string }>>('GET', '/v1/keys'))[0]!.id;
  const routes = [`/v1/receipts/${receiptId}/share`, `/v1/keys/${keyId}/unfreeze`, '/v1/billing/subscription/cancel', '/v1/auth/logout-all'];
  return { ...s, receiptId, routes };
}

const send = (path: string, headers: Record<string, string>, method = 'POST') => fetch(t.url + path, { method, headers });
const cookie = (token: string) => ({ cookie: `svc_session=${token}` });

async function expectRefused(res: Response, what: string) {
  expect(res.status, what).toBe(403);
  const body = (await res.json()) as { error: { type: string; message: string; request_id: string } };
  expect(body.error.type, what).toBe('csrf_refused');
  expect(body.error.request_id).toBe(res.headers.get('x-request-id'));
}

describe('cookie sessions and cross-site requests', () => {
  it('refuses the cookie with another origin on each unsafe session route; nothing changes', async () => {
    const a = await account();
    for (const path of a.routes) await expectRefused(await send(path, { ...cookie(a.token), origin: EVIL }), path);
    await expectRefused(await send('/v1/auth/logout', { ...cookie(a.token), origin: EVIL }), 'logout');
    await expectRefused(await send(`/v1/receipts/${a.receiptId}/share`, { ...cookie(a.token), origin: EVIL }, 'DELETE'), 'DELETE share');
    await expectRefused(await send(a.routes[0]!, { ...cookie(a.token), origin: 'null' }), 'Origin: null');
    await expectRefused(await send(a.routes[0]!, { ...cookie(a.token), origin: own.replace(/:\d+$/, ':1') }), 'another port of the host');
    // The session still works and the receipt is not shared.
    expect(await a.client.request('GET', '/v1/auth/me')).toMatchObject({ account_id: a.accountId });
    expect((await fetch(`${t.url}/v1/receipts/shared/${a.receiptId}`)).status).toBe(404);
  });

  it('accepts the cookie from the own origin', async () => {
    const a = await account();
    for (const path of a.routes) expect((await send(path, { ...cookie(a.token), origin: own })).status, path).toBe(200);
    expect((await fetch(`${t.url}/v1/receipts/shared/${a.receiptId}`)).status).toBe(200);
    // logout-all went through: the session is gone.
    expect((await send('/v1/auth/me', cookie(a.token), 'GET')).status).toBe(401);
  });

  it('without Origin, goes by Sec-Fetch-Site: same-origin and none pass, cross-site and same-site do not, nothing at all does not', async () => {
    const a = await account();
    const share = a.routes[0]!;
    await expectRefused(await send(share, { ...cookie(a.token), 'sec-fetch-site': 'cross-site' }), 'cross-site');
    await expectRefused(await send(share, { ...cookie(a.token), 'sec-fetch-site': 'same-site' }), 'same-site');
    await expectRefused(await send(share, cookie(a.token)), 'neither header');
    // Origin decides when both are sent.
    await expectRefused(await send(share, { ...cookie(a.token), origin: EVIL, 'sec-fetch-site': 'same-origin' }), 'evil Origin, same-origin');
    expect((await send(share, { ...cookie(a.token), 'sec-fetch-site': 'same-origin' })).status).toBe(200);
    expect((await send(share, { ...cookie(a.token), 'sec-fetch-site': 'none' })).status).toBe(200);
  });

  it('leaves bearer sessions and safe methods alone', async () => {
    const a = await account();
    for (const path of a.routes) {
      const res = await send(path, { authorization: `Bearer ${a.token}`, origin: EVIL, 'sec-fetch-site': 'cross-site', ...(path === '/v1/auth/logout-all' ? {} : cookie(a.token)) });
      expect(res.status, path).toBe(200);
    }
    const b = await account();
    expect((await send('/v1/auth/me', { ...cookie(b.token), origin: EVIL, 'sec-fetch-site': 'cross-site' }, 'GET')).status).toBe(200);
    expect((await send(`/v1/receipts/${b.receiptId}`, { ...cookie(b.token), origin: EVIL }, 'GET')).status).toBe(200);
  });
});
