import { request } from 'node:http';
import { maxHeaderSize } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PARAM_LENGTH } from '../control-plane/src/http/errors.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * Every refusal is the error envelope, including the ones the router and node's HTTP parser make before any
 * route runs: a path parameter past the length limit (414), a path that does not percent-decode (400), a
 * request line past node's header limit (431). Walked over every route the router serves.
 */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => t?.close());

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with node's http client, the path sent exactly as given (fetch would re-encode it). */
function send(method: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${t.url}${path}`, { method, agent: false, headers: method === 'GET' || method === 'DELETE' ? {} : { 'content-type': 'application/json' } });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.end(method === 'GET' || method === 'DELETE' ? undefined : '{}');
  });
}

/** The answer is `status` in the envelope, its request id the x-request-id header's. */
function expectEnvelope(a: Answer, status: number, type: string, what: string): void {
  expect({ what, status: a.status }).toEqual({ what, status });
  expect(a.headers['content-type'], what).toMatch(/^application\/json/);
  const body = JSON.parse(a.body) as { error: { type: string; message: string; request_id: string } };
  expect(body.error, what).toMatchObject({ type, message: expect.any(String), request_id: expect.stringMatching(/^req_/) });
  expect(a.headers['x-request-id'], what).toBe(body.error.request_id);
}

/** A route's path with each parameter filled: `first` for the first one, a plain value for the rest. */
function fill(url: string, first: string): string | null {
  let seen = false;
  const path = url.replace(/:[A-Za-z_]+|\*$/g, () => {
    if (seen) return 'x';
    seen = true;
    return first;
  });
  return seen ? path : null;
}

describe('refusals before any route runs', () => {
  const routes = () => t.gw.app.routeTable;

  it('walks every route that the test can reach', () => {
    expect(routes().length).toBeGreaterThan(50);
    expect(routes().filter((r) => fill(r.url, 'x')).length).toBeGreaterThan(10);
  });

  it('a path parameter past the length limit: 414 in the envelope, on every route with one', async () => {
    for (const r of routes()) {
      const path = fill(r.url, 'a'.repeat(MAX_PARAM_LENGTH + 1));
      if (!path || r.url.endsWith('*') && !/:[A-Za-z_]+/.test(r.url)) continue;
      expectEnvelope(await send(r.method, path), 414, 'invalid_request', `${r.method} ${r.url}`);
    }
  });

  it('a path that does not percent-decode (%ff): 400 in the envelope, on every route with a parameter', async () => {
    for (const r of routes()) {
      const path = fill(r.url, 'a%ffb');
      if (!path) continue;
      expectEnvelope(await send(r.method, path), 400, 'invalid_request', `${r.method} ${r.url}`);
    }
  });

  it('%ff in a fixed path: the envelope (400 or 404), on every route without a parameter', async () => {
    for (const r of routes()) {
      if (fill(r.url, 'x')) continue;
      const a = await send(r.method, `${r.url}%ff`);
      expect([400, 404], `${r.method} ${r.url}`).toContain(a.status);
      expectEnvelope(a, a.status, a.status === 404 ? 'not_found' : 'invalid_request', `${r.method} ${r.url}`);
    }
  });

  it("a URL past node's header limit: 431 in the envelope, on every route", async () => {
    const long = 'q='.padEnd(maxHeaderSize + 1024, 'a');
    for (const r of routes()) {
      const path = fill(r.url, 'x') ?? r.url;
      expectEnvelope(await send(r.method, `${path}?${long}`), 431, 'invalid_request', `${r.method} ${r.url}`);
    }
  });

  it('a malformed request line: 400 in the envelope', async () => {
    const { connect } = await import('node:net');
    const u = new URL(t.url);
    const raw = await new Promise<string>((resolve, reject) => {
      const s = connect(Number(u.port), u.hostname, () => s.write('GET /v1/models HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n'));
      let got = '';
      s.on('data', (d) => (got += d.toString()));
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
    const [head, body] = raw.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(body!).error).toMatchObject({ type: 'invalid_request', request_id: expect.stringMatching(/^req_/) });
  });
});
