import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { APIError } from 'openai';
import { fundedKey, METRICS_TOKEN, startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * A body over its route's limit is answered 413 in the envelope, and the client gets to read that answer:
 * the rest of the body is read and dropped (up to SVC_BODY_DRAIN_BYTES) instead of the connection being
 * closed under a client that is still writing.
 */
let t: TestGateway;
let key: string;
beforeAll(async () => {
  t = await startTestGateway({ env: { SVC_BODY_DRAIN_BYTES: String(20 * 1024 * 1024) } });
  key = (await fundedKey(t, 1_000_000)).key;
});
afterAll(async () => t?.close());

/** How many chat-completion requests the gateway answered 4xx, by its own request counter. */
async function answered4xx(): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith('svc_http_requests_total{') && l.includes('route="/v1/chat/completions"') && l.includes('status="4xx"'));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** A chat completion whose one message makes the body about `bytes` long. */
const bigChat = (bytes: number) => ({ model: 'any-model', messages: [{ role: 'user' as const, content: 'x'.repeat(bytes) }] });

/** POSTs `body` with node's http client, which goes on writing all of it whenever the answer comes. */
async function postWhole(path: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const req = request(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers } });
  const failed = new Promise<never>((_, reject) => req.on('error', reject));
  const answered = new Promise<{ status: number; headers: Record<string, unknown>; text: string }>((resolve) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
  });
  const written = new Promise<void>((resolve) => req.end(body, resolve));
  const [r] = await Promise.race([Promise.all([answered, written]), failed]);
  return r;
}

describe('a body over the limit', () => {
  it('the openai SDK sending ~17 MiB gets an APIError 413 payload_too_large, sent once (no retry)', async () => {
    const before = await answered4xx();
    const openai = new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 2 });
    const e = await openai.chat.completions.create(bigChat(17 * 1024 * 1024)).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(APIError);
    expect((e as APIError).status).toBe(413);
    expect((e as APIError).error).toMatchObject({ type: 'payload_too_large', request_id: expect.stringMatching(/^req_/) });
    expect(await answered4xx()).toBe(before + 1);
  });

  it("node's http client writing the whole body first reads the 413, with or without a declared length", async () => {
    const body = Buffer.from(JSON.stringify(bigChat(17 * 1024 * 1024)));
    for (const headers of [{}, { 'transfer-encoding': 'chunked' }] as Record<string, string>[]) {
      const r = await postWhole('/v1/chat/completions', body, headers);
      expect(r.status).toBe(413);
      expect(JSON.parse(r.text)).toMatchObject({ error: { type: 'payload_too_large', request_id: r.headers['x-request-id'] } });
    }
  });

  it('past the drain cap the answer still comes first and the connection is then closed', async () => {
    // 24 MiB declared against a 20 MiB cap: answered at once with connection: close, as before.
    const r = await new Promise<{ status: number; connection: unknown; text: string }>((resolve, reject) => {
      const req = request(`${t.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(24 * 1024 * 1024) } });
      req.on('error', reject);
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          resolve({ status: res.statusCode!, connection: res.headers.connection, text });
          req.destroy();
        });
      });
      req.write('{"model":"m","messages":[');
    });
    expect(r).toMatchObject({ status: 413, connection: 'close' });
    expect(JSON.parse(r.text).error.type).toBe('payload_too_large');
  });
});
