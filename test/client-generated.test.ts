import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, SvcClient, isInsufficientCredit, retryAfterSeconds } from '@svc/shared/client';
import { GEN_COMMAND, clientTypes, openApiDocument, readCommitted, staleness } from '../scripts/gen-client.ts';
import { ENFORCED_BILLING, fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';

/**
 * The API client's types are generated from the router's own OpenAPI document (scripts/gen-client.ts) and
 * committed; this file fails when they are stale, naming the command that regenerates them. It also checks the
 * client's error object against real gateway answers: the envelope intact, `insufficient_credit` with its
 * payment terms, and Retry-After on a 429.
 */
describe('generated client types', () => {
  let doc: Record<string, unknown>;
  let fresh: string;
  beforeAll(async () => {
    doc = await openApiDocument();
    fresh = await clientTypes(doc);
  });

  it('match the router: the committed shared/src/client/generated/openapi.ts is current', () => {
    const why = staleness(readCommitted(), fresh);
    if (why) throw new Error(why);
  });

  it('a stale file is reported with the routes it lacks and the exact command to run', async () => {
    const paths = { ...(doc.paths as Record<string, unknown>) };
    delete paths['/v1/receipts/pubkey'];
    const older = await clientTypes({ ...doc, paths });
    const why = staleness(older, fresh)!;
    expect(why).toContain('is stale against the router');
    expect(why).toContain('routes not in it: GET /v1/receipts/pubkey');
    expect(why).toContain(`Run \`${GEN_COMMAND}\``);
    expect(GEN_COMMAND).toBe('npm run gen:client');
    expect(staleness(fresh, older)).toContain('routes gone from the router: GET /v1/receipts/pubkey');
    expect(staleness(null, fresh)).toMatch(/is missing\.\nRun `npm run gen:client`/);
  });
});

describe('the client error object', () => {
  const TREASURY = ENFORCED_BILLING.SVC_TREASURY_ADDRESS;
  let t: TestGateway;
  let up: TestUpstream;
  beforeAll(async () => {
    up = await startUpstream();
    t = await startTestGateway({
      env: {
        ...ENFORCED_BILLING,
        SVC_PROVIDERS: JSON.stringify([{ name: 'local', base_url: up.url, models: [{ id: 'test-chat', input_micro_usd_per_mtok: 1, output_micro_usd_per_mtok: 1 }] }]),
        SVC_ASSISTANT_MODEL: 'test-chat',
        SVC_ASSISTANT_RATE_LIMIT: '1',
        SVC_ASSISTANT_RATE_WINDOW_SECONDS: '60',
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await up?.close();
  });

  const notarize = (c: SvcClient) => c.request('POST', '/v1/notary/receipts', { body: { input_sha256: 'a'.repeat(64), output_sha256: 'b'.repeat(64) } });
  const caught = (p: Promise<unknown>) =>
    p.then(
      () => {
        throw new Error('expected an ApiError');
      },
      (e: unknown) => e as ApiError,
    );

  it('keeps the 402 envelope as sent, with a predicate for insufficient_credit and its x402 terms', async () => {
    const s = await fundedKey(t, 0);
    const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: s.key } });
    const raw = await api.raw('POST', '/v1/notary/receipts', { body: { input_sha256: 'a'.repeat(64), output_sha256: 'b'.repeat(64) } });
    const sent = (await raw.json()) as { error: Record<string, unknown> };

    const e = await caught(notarize(api));
    expect(e).toBeInstanceOf(ApiError);
    expect(e.status).toBe(402);
    expect(e.type).toBe('insufficient_credit');
    expect(isInsufficientCredit(e)).toBe(true);
    expect(e.isInsufficientCredit()).toBe(true);
    // The envelope intact: every field the gateway sent, extra fields included.
    expect(Object.keys(e.body!.error).sort()).toEqual(Object.keys(sent.error).sort());
    expect(e.body!.error.request_id).toMatch(/\S/);
    expect(e.requestId).toBe(e.body!.error.request_id);
    expect(e.extra).toMatchObject({ x402Version: 1 });
    expect(e.paymentTerms).toHaveLength(1);
    expect(e.paymentTerms[0]).toMatchObject({ scheme: 'exact', payTo: TREASURY, asset: ENFORCED_BILLING.SVC_USDT_CONTRACT, maxAmountRequired: expect.stringMatching(/^\d+$/) });
    expect(e.retryAfterSeconds).toBeUndefined();
  });

  it('a spend cap is a 402 that paying does not clear: no predicate, no terms', async () => {
    const s = await fundedKey(t, 1_000_000);
    const capped = await s.client.createKey({ spend_cap_micro_usd: 0 });
    const e = await caught(notarize(new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: capped.key } })));
    expect(e.status).toBe(402);
    expect(e.type).toBe('spend_cap_reached');
    expect(isInsufficientCredit(e)).toBe(false);
    expect(e.paymentTerms).toEqual([]);
  });

  it('a typed call through the generated client: validation errors keep param; a 429 exposes Retry-After seconds', async () => {
    const bad = await caught(t.client.call(t.client.api.POST('/v1/assistant', { body: { messages: [] } })));
    expect(bad.status).toBe(400);
    expect(bad.type).toBe('invalid_request');
    expect(bad.param).toBe('messages');

    const ask = () => t.client.call(t.client.api.POST('/v1/assistant', { body: { messages: [{ role: 'user', content: 'hi' }] } }));
    const ok = await ask();
    expect(ok.object).toBe('assistant.reply');
    const limited = await caught(ask());
    expect(limited.status).toBe(429);
    expect(limited.type).toBe('rate_limited');
    expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(limited.retryAfterSeconds).toBe(Number(limited.headers.get('retry-after')));
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(60);
  });

  it("the generated client carries the client's credential; a call may name another or none", async () => {
    const s = await t.signIn();
    const me = await s.client.call(s.client.api.GET('/v1/auth/me'));
    expect(me.account_id).toBe(s.accountId);
    const anonymous = await caught(s.client.request('GET', '/v1/auth/me', { credential: null }));
    expect({ status: anonymous.status, type: anonymous.type }).toEqual({ status: 401, type: 'authentication_required' });
    const other = await t.signIn();
    expect((await t.client.request<{ account_id: string }>('GET', '/v1/auth/me', { credential: { kind: 'session', token: other.token } })).account_id).toBe(other.accountId);
  });

  it('reads Retry-After as seconds or an HTTP date, and only on a 429 or 503', () => {
    const now = Date.parse('2026-11-24T12:00:00Z');
    expect(retryAfterSeconds('17', now)).toBe(17);
    expect(retryAfterSeconds('Tue, 24 Nov 2026 12:01:30 GMT', now)).toBe(90);
    expect(retryAfterSeconds('soon', now)).toBeUndefined();
    const envelope = { error: { type: 'unavailable', message: 'busy', retry_after: 4 } };
    expect(new ApiError(503, envelope, new Headers()).retryAfterSeconds).toBe(4);
    expect(new ApiError(503, envelope, new Headers({ 'retry-after': '9' })).retryAfterSeconds).toBe(9);
    expect(new ApiError(400, envelope, new Headers({ 'retry-after': '9' })).retryAfterSeconds).toBeUndefined();
    const notJson = new ApiError(502, '<html>bad gateway</html>', new Headers({ 'x-request-id': 'req_1' }));
    expect({ type: notJson.type, message: notJson.message, requestId: notJson.requestId, body: notJson.body }).toEqual({ type: 'unknown', message: 'HTTP 502', requestId: 'req_1', body: undefined });
  });
});
