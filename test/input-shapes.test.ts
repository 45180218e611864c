import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { MAX_CODE_BYTES } from '../control-plane/src/modules/agents/service.ts';
import { MAX_MESSAGE_BYTES } from '../control-plane/src/modules/agents/mailbox.ts';
import { MAX_BODY_BYTES } from '../control-plane/src/modules/post/service.ts';
import { expectApiError } from './support/expect-error.ts';
import { fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * One answer for one kind of input, on every route: the wildcard path parameter is named as the OpenAPI document
 * names it, text counted in bytes is a 413 past its limit whatever its characters, a request for no route is a
 * 404 whatever its Content-Type, and a body a route takes as optional may be left out. (A per-account limit is a
 * 409 with a reason: test/guardrails.test.ts, test/mandates.test.ts and the other areas' files.)
 */
let t: TestGateway;
let s: Awaited<ReturnType<typeof fundedKey>>;
let key: SvcClient;
let doc: { paths: Record<string, Record<string, { security?: Array<Record<string, string[]>>; requestBody?: { required?: boolean } }>> };
beforeAll(async () => {
  t = await startTestGateway();
  s = await fundedKey(t, 1_000_000);
  key = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: s.key } });
  doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as typeof doc;
});
afterAll(async () => t?.close());

const auth = (op: { security?: Array<Record<string, string[]>> }): Record<string, string> => {
  const schemes = (op.security ?? []).flatMap((x) => Object.keys(x));
  return schemes.includes('apiKey') ? { authorization: `Bearer ${s.key}` } : schemes.includes('session') ? { authorization: `Bearer ${s.token}` } : {};
};
const operations = () => Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method: method.toUpperCase(), op })));

describe('the wildcard path parameter', () => {
  it('is `path` in errors, as in the OpenAPI document, on every wildcard route', async () => {
    const wild = operations().filter((o) => o.path.endsWith('/{path}'));
    expect(wild.length).toBeGreaterThan(0);
    for (const { path, method, op } of wild) {
      const url = `${t.url}${path.replace('/{path}', `/${'a'.repeat(5000)}`).replace(/\{[^}]+\}/g, 'x')}`;
      const r = await fetch(url, { method, headers: { ...auth(op), ...(method === 'PUT' ? { 'content-type': 'application/octet-stream' } : {}) }, ...(method === 'PUT' ? { body: 'x' } : {}) });
      const body = (await r.json()) as { error: { type: string; message: string; param?: string } };
      expect({ route: `${method} ${path}`, status: r.status, param: body.error.param }).toEqual({ route: `${method} ${path}`, status: 400, param: 'path' });
      expect(body.error.message).toMatch(/^params\.path: /);
    }
  });
});

describe('text limited in bytes', () => {
  const cases = [
    ['a program', MAX_CODE_BYTES, (text: string) => s.client.request('POST', '/v1/agents', { body: { name: 'big', language: 'sh', code: text } }), 'code'],
    ['a mailbox message', MAX_MESSAGE_BYTES, (text: string) => key.request('POST', '/v1/agents/agt_none/messages', { body: { content: text } }), 'content'],
    ['its other name', MAX_MESSAGE_BYTES, (text: string) => key.request('POST', '/v1/agents/agt_none/messages', { body: { body: text } }), 'body'],
    ['a run input', MAX_MESSAGE_BYTES, (text: string) => s.client.request('POST', '/v1/agents/agt_none/trigger', { body: { input: text } }), 'input'],
    ['Agent Post mail', MAX_BODY_BYTES, (text: string) => key.request('POST', '/v1/post/messages', { body: { to: 'nobody-here', body: text } }), 'body'],
  ] as const;

  it('is 413 naming the field past its limit, in one-byte or in four-byte characters', async () => {
    for (const [what, limit, send, param] of cases) {
      for (const text of ['a'.repeat(limit + 1), '\u{1F600}'.repeat(limit / 4 + 1), 'é'.repeat(limit / 2 + 1)]) {
        const e = await expectApiError(send(text), 413, 'payload_too_large');
        expect({ what, chars: text.length, param: e.param, limit: e.extra.limit_bytes }).toEqual({ what, chars: text.length, param, limit });
      }
    }
  });

  it('is taken at its limit exactly', async () => {
    const agent = await s.client.request<{ id: string }>('POST', '/v1/agents', { body: { name: 'edge', language: 'sh', code: `${'\u{1F600}'.repeat(MAX_CODE_BYTES / 4 - 1)}éé` } });
    expect(agent.id).toMatch(/^agt_/);
    await s.client.request('DELETE', `/v1/agents/${agent.id}`);
  });
});

describe('a request for no route', () => {
  it('is 404 whatever its Content-Type and body', async () => {
    const kinds: Array<[string, string]> = [['text/plain', 'x'], ['application/octet-stream', 'x'], ['multipart/form-data; boundary=b', '--b--'], ['application/json', '{not json'], ['application/json', '{}']];
    for (const path of ['/v1/agents/agt_x/hooks/tok/extra', '/v1/no/such/route']) {
      for (const [type, body] of kinds) {
        const r = await fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
        const e = (await r.json()) as { error: { type: string } };
        expect({ path, type, status: r.status, error: e.error.type }).toEqual({ path, type, status: 404, error: 'not_found' });
      }
    }
  });
});

describe('an optional body', () => {
  it('may be left out on every route that takes one as optional (the document says so too)', async () => {
    const optional = operations().filter((o) => o.op.requestBody && o.op.requestBody.required === false);
    for (const route of ['POST /v1/keys', 'POST /v1/keys/delegate', 'POST /v1/evals/{id}/run', 'POST /v1/ghost/sessions']) {
      expect(optional.map((o) => `${o.method} ${o.path}`)).toContain(route);
    }
    for (const { path, method, op } of optional) {
      const r = await fetch(`${t.url}${path.replace(/\{[^}]+\}/g, 'x')}`, { method, headers: auth(op) });
      const e = r.status === 400 ? ((await r.json()) as { error: { message: string } }).error.message : '';
      expect({ route: `${method} ${path}`, refused: e }).not.toMatchObject({ refused: expect.stringMatching(/^body/) });
    }
    const made = await fetch(`${t.url}/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${s.token}` } });
    expect(made.status).toBe(201);
  });
});
