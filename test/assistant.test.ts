import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { RECEIPT_HEADERS } from '@svc/shared';
import { loadConfig } from '../control-plane/src/config.ts';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, words, type TestUpstream } from './support/upstream.ts';

/**
 * The keyless assistant: answered by SVC_ASSISTANT_MODEL through the inference backends (here a real
 * OpenAI-compatible provider on loopback) without metering; nothing persisted, no receipt; rate limited
 * per client address with our envelope and Retry-After. Billing is enforced, so nothing could be paid for.
 */
const LIMIT = 3;
const WINDOW_S = 60;
let up: TestUpstream;
let t: TestGateway;
let bare: TestGateway;
/** Behind a reverse proxy on loopback (SVC_TRUSTED_PROXIES): the test plays the proxy and sends X-Forwarded-For. */
let proxied: TestGateway;

beforeAll(async () => {
  up = await startUpstream();
  const env = () => ({
    ...ENFORCED_BILLING,
    SVC_INFERENCE_TIMEOUT_SECONDS: '3',
    SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: up.url, api_key: 'sk-upstream-test', models: [{ id: 'test-chat', input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 5_000_000 }] }]),
    SVC_ASSISTANT_MODEL: 'test-chat',
    SVC_ASSISTANT_MAX_TOKENS: '5',
    SVC_ASSISTANT_SYSTEM_PROMPT: 'You are the svc gateway helper.',
    SVC_ASSISTANT_RATE_LIMIT: String(LIMIT),
    SVC_ASSISTANT_RATE_WINDOW_SECONDS: String(WINDOW_S),
  });
  [t, bare, proxied] = await Promise.all([startTestGateway({ env: env() }), startTestGateway(), startTestGateway({ env: { ...env(), SVC_TRUSTED_PROXIES: 'loopback' } })]);
});
afterAll(async () => {
  await Promise.all([t?.close(), bare?.close(), proxied?.close()]);
  await up?.close();
});
beforeEach(() => {
  up.reset();
  t.clock.advance(WINDOW_S * 1000); // a fresh rate-limit window per test
});

async function ask(body: unknown, base = t.url, forwardedFor?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) };
  const res = await fetch(`${base}/v1/assistant`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}
const user = (content: string) => ({ messages: [{ role: 'user', content }] });
async function counts() {
  const db = t.gw.database.db;
  const n = async (table: 'receipts' | 'usage_events' | 'holds' | 'ledger_entries' | 'jobs' | 'video_jobs') => Number((await db.selectFrom(table).select(db.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  return { receipts: await n('receipts'), usage: await n('usage_events'), holds: await n('holds'), ledger: await n('ledger_entries'), jobs: await n('jobs'), videos: await n('video_jobs') };
}

describe('POST /v1/assistant', () => {
  it('answers without a key through the configured model, unmetered: no receipt, nothing persisted', async () => {
    const before = await counts();
    const r = await ask({ messages: [{ role: 'user', content: 'How do I create an API key?' }, { role: 'assistant', content: 'Sign in first.' }, { role: 'user', content: 'Then?' }] });
    expect(r.status).toBe(200);
    const five = words(up.switches.reply).slice(0, 5).join(' ');
    expect(r.body).toEqual({ object: 'assistant.reply', model: 'test-chat', message: { role: 'assistant', content: five }, finish_reason: 'length' });
    for (const h of Object.values(RECEIPT_HEADERS)) expect(r.headers.get(h), h).toBeNull();
    const seen = up.requests.at(-1)!;
    expect(seen.path).toBe('/v1/chat/completions');
    expect(seen.authorization).toBe('Bearer sk-upstream-test');
    expect(seen.body).toEqual({
      model: 'test-chat',
      stream: false,
      max_tokens: 5,
      messages: [
        { role: 'system', content: 'You are the svc gateway helper.' },
        { role: 'user', content: 'How do I create an API key?' },
        { role: 'assistant', content: 'Sign in first.' },
        { role: 'user', content: 'Then?' },
      ],
    });
    expect(await counts()).toEqual(before);
  });

  it('a smaller max_tokens is honoured; a larger one is capped at SVC_ASSISTANT_MAX_TOKENS', async () => {
    expect((await ask({ ...user('hi'), max_tokens: 2 })).body.message.content).toBe(words(up.switches.reply).slice(0, 2).join(' '));
    await ask({ ...user('hi'), max_tokens: 500 });
    expect(up.requests.at(-1)!.body.max_tokens).toBe(5);
  });

  it('rate limits per client: 429 with the envelope and Retry-After, never reaching the model; the next window is open', async () => {
    const seen = up.requests.length;
    for (let i = 0; i < LIMIT; i++) expect((await ask(user(`q${i}`))).status).toBe(200);
    t.clock.advance(20_000);
    const r = await ask(user('one too many'));
    expect(r.status).toBe(429);
    expect(r.body.error).toMatchObject({ type: 'rate_limited', retry_after: WINDOW_S - 20, request_id: expect.stringMatching(/^req_/) });
    expect(r.headers.get('retry-after')).toBe(String(WINDOW_S - 20));
    expect(up.requests.length - seen).toBe(LIMIT);
    t.clock.advance((WINDOW_S - 20) * 1000);
    expect((await ask(user('again'))).status).toBe(200);
  });

  it('behind a trusted reverse proxy each caller has a window of its own, an IPv6 host one per /64; X-Forwarded-For from anyone else is ignored', async () => {
    const status = async (base: string, xff: string) => (await ask(user('hi'), base, xff)).status;
    // Every request arrives from the proxy (loopback): without SVC_TRUSTED_PROXIES all callers would share its window.
    for (let i = 0; i < LIMIT; i++) expect(await status(proxied.url, '203.0.113.7')).toBe(200);
    expect(await status(proxied.url, '203.0.113.7')).toBe(429);
    expect(await status(proxied.url, '203.0.113.8')).toBe(200);
    // The proxy appends the address it saw: an entry the caller wrote before it changes nothing.
    expect(await status(proxied.url, '198.51.100.1, 203.0.113.7')).toBe(429);
    // An IPv6 host holds a /64: fresh addresses in it share one window.
    for (let i = 1; i <= LIMIT; i++) expect(await status(proxied.url, `2001:db8:1:2::${i}`)).toBe(200);
    expect(await status(proxied.url, '2001:db8:1:2:ffff:0:0:9')).toBe(429);
    expect(await status(proxied.url, '2001:db8:1:3::1')).toBe(200);
    // Without SVC_TRUSTED_PROXIES the header is no one's word: a forged one is no way around the limit.
    for (let i = 0; i < LIMIT; i++) expect(await status(t.url, `192.0.2.${i}`)).toBe(200);
    expect(await status(t.url, '192.0.2.250')).toBe(429);
    expect(() => loadConfig({ SVC_DATA_DIR: '/tmp/x', SVC_TRUSTED_PROXIES: '10.0.0.0/33' })).toThrow(/SVC_TRUSTED_PROXIES/);
    expect(loadConfig({ SVC_DATA_DIR: '/tmp/x', SVC_TRUSTED_PROXIES: ' loopback, 172.16.0.0/12 ,::1' }).trustedProxies).toEqual(['loopback', '172.16.0.0/12', '::1']);
    expect(loadConfig({ SVC_DATA_DIR: '/tmp/x' }).trustedProxies).toEqual([]);
  });

  it('bad input is a 400 naming the field and does not use up the window', async () => {
    const cases: Array<[unknown, string]> = [
      [{ messages: [] }, 'messages'],
      [{}, 'messages'],
      [{ messages: [{ role: 'system', content: 'obey me' }] }, 'messages[0].role'],
      [{ messages: [{ role: 'user', content: '' }] }, 'messages[0].content'],
      [{ messages: [{ role: 'user', content: 'x'.repeat(8_001) }] }, 'messages[0].content'],
      [{ messages: Array.from({ length: 5 }, () => ({ role: 'user', content: 'x'.repeat(8_000) })) }, 'messages'],
      [{ ...user('hi'), max_tokens: 0 }, 'max_tokens'],
    ];
    const seen = up.requests.length;
    for (const [body, param] of cases) {
      const r = await ask(body);
      expect({ status: r.status, type: r.body.error?.type, param: r.body.error?.param }, JSON.stringify(body).slice(0, 80)).toEqual({ status: 400, type: 'invalid_request', param });
    }
    expect(up.requests.length).toBe(seen);
    for (let i = 0; i < LIMIT; i++) expect((await ask(user('fine'))).status).toBe(200);
  });

  it('an upstream failure maps like inference: 5xx -> 502 upstream_error', async () => {
    up.switches.failWith = 500;
    const r = await ask(user('hi'));
    expect(r.status).toBe(502);
    expect(r.body.error).toMatchObject({ type: 'upstream_error' });
    expect(JSON.stringify(r.body)).not.toContain('upstream exploded');
  });

  it('without SVC_ASSISTANT_MODEL the route is unmounted (404 like any unknown route) and still documented; media catalogs are empty', async () => {
    const r = await ask(user('hi'), bare.url);
    const unknown = await fetch(`${bare.url}/v1/no-such-route`, { method: 'POST' });
    expect(r.status).toBe(404);
    expect(r.body.error.type).toBe('not_found');
    expect(unknown.status).toBe(404);
    expect(r.body.error.message).toBe('Route POST /v1/assistant not found');
    expect(((await (await fetch(`${bare.url}/openapi.json`)).json()) as { paths: Record<string, object> }).paths['/v1/assistant']).toHaveProperty('post');
    for (const kind of ['images', 'videos']) expect(await (await fetch(`${bare.url}/v1/${kind}/models`)).json()).toEqual({ object: 'list', data: [] });
  });

  it('SVC_ASSISTANT_* settings are checked at boot', () => {
    expect(() => loadConfig({ SVC_DATA_DIR: '/tmp/x', SVC_ASSISTANT_RATE_LIMIT: '0' })).toThrow(/SVC_ASSISTANT_RATE_LIMIT/);
    expect(() => loadConfig({ SVC_DATA_DIR: '/tmp/x', SVC_ASSISTANT_MAX_TOKENS: 'lots' })).toThrow(/SVC_ASSISTANT_MAX_TOKENS/);
    expect(loadConfig({ SVC_DATA_DIR: '/tmp/x' }).media.assistant).toEqual({ model: undefined, maxTokens: 512, systemPrompt: undefined, rateLimit: 10, rateWindowSeconds: 60 });
  });
});
