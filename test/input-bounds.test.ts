import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { MAX_JSON_DEPTH } from '../control-plane/src/http/body.ts';
import { expectApiError } from './support/expect-error.ts';
import { fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * Input the database or a node cannot take is a 400 naming the field, not a 500 (or a 502 from the node):
 * date-times outside what Postgres and PGlite store, JSON nested past the stack, NUL characters bound for a
 * sandboxed process.
 */
let t: TestGateway;
let s: Awaited<ReturnType<typeof fundedKey>>;
let key: SvcClient;
beforeAll(async () => {
  t = await startTestGateway();
  s = await fundedKey(t, 1_000_000);
  key = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await s.client.createKey({ scopes: ['keys:delegate', 'sandboxes'] })).key } });
});
afterAll(async () => t?.close());

const OUT_OF_RANGE = ['99999-01-01', '+275760-09-13T00:00:00.000Z', '0000-01-01T00:00:00Z', '10000-01-01T00:00:00Z', '1969-12-31T23:59:59Z', '9999-12-31T23:00:00-05:00'];

describe('date-times', () => {
  it('usage events: since and until out of range are 400 naming the field', async () => {
    for (const param of ['since', 'until']) {
      for (const v of OUT_OF_RANGE) {
        const e = await expectApiError(s.client.request('GET', '/v1/usage/events', { query: { [param]: v } }), 400, 'invalid_request');
        expect(e.param, `${param}=${v}`).toBe(param);
      }
    }
    // The ends of the range are served.
    await s.client.request('GET', '/v1/usage/events', { query: { since: '1970-01-01T00:00:00Z', until: '9999-12-31T23:59:59.999Z' } });
  });

  it('keys and delegated keys: expires_at out of range is 400 naming the field', async () => {
    for (const v of OUT_OF_RANGE) {
      expect((await expectApiError(s.client.createKey({ expires_at: v }), 400, 'invalid_request')).param, v).toBe('expires_at');
      expect((await expectApiError(key.delegateKey({ expires_at: v }), 400, 'invalid_request')).param, v).toBe('expires_at');
    }
    const last = await s.client.createKey({ expires_at: '9999-12-31T23:59:59Z' });
    expect(last.expires_at).toBe('9999-12-31T23:59:59.000Z');
  });

  it('the SLA report: from and to out of range are 400 naming the field', async () => {
    const e = await expectApiError(s.client.request('POST', '/v1/reports/sla', { body: { from: '0000-01-01T00:00:00Z', to: '0000-06-01T00:00:00Z' } }), 400, 'invalid_request');
    expect(e.param).toBe('from');
  });
});

describe('JSON nesting', () => {
  const nested = (levels: number) => `${'{"a":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`;
  const post = (path: string, body: string) => fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });

  it(`a body nested past ${MAX_JSON_DEPTH} levels is 400 in the envelope, on every route (verify, its alias, any other)`, async () => {
    for (const path of ['/v1/images/verify', '/v1/videos/verify', '/v1/auth/verify']) {
      const r = await post(path, `{"manifest":${nested(5000)}}`);
      expect(r.status, path).toBe(400);
      expect(((await r.json()) as { error: unknown }).error, path).toMatchObject({ type: 'invalid_json', request_id: expect.stringMatching(/^req_/) });
    }
    const edge = await post('/v1/images/verify', `{"manifest":${nested(MAX_JSON_DEPTH - 1)}}`);
    expect(edge.status).toBe(200);
    expect((await post('/v1/images/verify', `{"manifest":${nested(MAX_JSON_DEPTH)}}`)).status).toBe(400);
  });

  it('a manifest sent as JSON text nested that deep is reported, not a 500', async () => {
    const r = await post('/v1/images/verify', JSON.stringify({ manifest: nested(5000), signature: '0x00' }));
    expect(r.status).toBe(200);
    const v = (await r.json()) as { manifest_found: boolean; reasons: string[] };
    expect(v.manifest_found).toBe(false);
    expect(v.reasons).toContain('manifest: nests too deep');
  });
});

describe('NUL characters bound for a sandbox', () => {
  const cases: Array<[string, string, Record<string, unknown>, string]> = [
    ['one-shot code', '/v1/sandboxes', { code: 'echo a\u0000b' }, 'code'],
    ['one-shot command argument', '/v1/sandboxes', { command: ['echo', 'a\u0000b'] }, 'command[1]'],
    ['one-shot env value', '/v1/sandboxes', { code: 'env', env: { A: 'x\u0000' } }, 'env.A'],
    ['one-shot file path', '/v1/sandboxes', { code: 'ls', files: [{ path: 'a\u0000b', content: '' }] }, 'files[0].path'],
    ['session env value', '/v1/sandboxes/sessions', { env: { A: '\u0000' } }, 'env.A'],
    ['session exec code', '/v1/sandboxes/sessions/sess_none/exec', { code: '\u0000' }, 'code'],
    ['session exec command argument', '/v1/sandboxes/sessions/sess_none/exec', { command: ['\u0000'] }, 'command[0]'],
    ['session exec env value', '/v1/sandboxes/sessions/sess_none/exec', { code: 'env', env: { B: 'b\u0000' } }, 'env.B'],
  ];
  for (const [what, path, body, param] of cases) {
    it(`${what}: 400 naming ${param}`, async () => {
      const e = await expectApiError(key.request('POST', path, { body }), 400, 'invalid_request');
      expect(e.param).toBe(param);
      expect(e.message).toContain('NUL');
    });
  }
});
