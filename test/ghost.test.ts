import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { GHOST_MAX_LIFETIME_SECONDS, MAX_LIVE_GHOSTS } from '../control-plane/src/modules/ghost/service.ts';

/** Ghost sessions end to end; time moves on the gateway's injected clock. */
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => t?.close());

type Json = Record<string, any>;
const asKey = (secret: string) => new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: secret } });
/** A key route that needs the billing scope and no upstream. */
const credit = (secret: string) => asKey(secret).request<Json>('GET', '/v1/credit');
const start = (c: SvcClient, body: Json = {}) => c.request<Json>('POST', '/v1/ghost/sessions', { body: { scopes: ['billing'], ...body } });
const list = async (c: SvcClient) => (await c.request<Json>('GET', '/v1/ghost/sessions')).sessions as Json[];
const ghostRows = async () => Number((await t.gw.database.db.selectFrom('ghost_sessions').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

describe('ghost sessions', () => {
  it('starts with a key shown once; seconds_remaining moves with the clock', async () => {
    const s = await t.signIn();
    const g = await start(s.client, { name: 'scratch', ttl_seconds: 600 });
    expect(g).toMatchObject({ object: 'ghost_session', name: 'scratch', status: 'active', scopes: ['billing'], seconds_remaining: 600, lifetime_seconds: 600, max_lifetime_seconds: GHOST_MAX_LIFETIME_SECONDS });
    expect(g.id).toMatch(/^ghost_/);
    expect(g.key).toMatch(/^sk-svc_/);
    const row = await t.gw.database.db.selectFrom('api_keys').selectAll().where('id', '=', g.key_id).executeTakeFirstOrThrow();
    expect(row.secret_hash).toBe(createHash('sha256').update(g.key, 'utf8').digest('hex'));
    expect(JSON.stringify(await list(s.client))).not.toContain(g.key);

    await credit(g.key);
    await expectApiError(asKey(g.key).delegateKey(), 403, 'insufficient_scope'); // scoped
    t.clock.advance(90_000);
    const [listed] = await list(s.client);
    expect(listed).toMatchObject({ id: g.id, seconds_remaining: 510, status: 'active' });
    expect((await s.client.request<Json>('GET', `/v1/ghost/sessions/${g.id}`)).seconds_remaining).toBe(510);
    await expectApiError(s.client.rotateKey(g.key_id), 409, 'conflict'); // a ghost key is never rotated
  });

  it('carries a policy: the key names it, and another account\'s rule set is refused with nothing written', async () => {
    const s = await t.signIn();
    const rules = await s.client.request<Json>('POST', '/v1/guardrails', { body: { detectors: [{ type: 'pii', input: 'redact', output: 'redact' }] } });
    const g = await start(s.client, { policy: { guardrails: [rules.id], max_output_tokens: 64 } });
    const key = (await s.client.request<Json[]>('GET', '/v1/keys')).find((k) => k.id === g.key_id)!;
    const policies = (await s.client.request<Json>('GET', '/v1/policies')).policies as Json[];
    expect(policies.find((p) => p.id === key.policy_id)).toMatchObject({ guardrails: [rules.id], max_output_tokens: 64 });
    const other = await t.signIn();
    const before = await ghostRows();
    const e = await expectApiError(start(other.client, { policy: { guardrails: [rules.id] } }), 400, 'invalid_request');
    expect(e.param).toBe('policy.guardrails[0]');
    expect(await ghostRows()).toBe(before);
  });

  it('is refused the very moment it expires, by the key path on the request (no sweep ran)', async () => {
    const s = await t.signIn();
    const g = await start(s.client, { ttl_seconds: 120 });
    await credit(g.key); // now cached as a live key
    t.clock.advance(120_000 - 1);
    await credit(g.key);
    expect((await s.client.request<Json>('GET', `/v1/ghost/sessions/${g.id}`)).seconds_remaining).toBe(0);
    t.clock.advance(1); // exactly the lifetime
    const e = await expectApiError(credit(g.key), 401, 'invalid_credential');
    expect(e.message).toMatch(/expired/);
    expect((await s.client.request<Json>('GET', `/v1/ghost/sessions/${g.id}`)).status).toBe('expired');
    await expectApiError(s.client.request('POST', `/v1/ghost/sessions/${g.id}/extend`, { body: { seconds: 60 } }), 409, 'conflict');

    // The leader's sweep then purges the metadata of expired ghosts.
    await t.gw.leader.runAllOnce();
    await expectApiError(s.client.request('GET', `/v1/ghost/sessions/${g.id}`), 404, 'not_found');
  });

  it('extends while the whole life stays within 24 hours; past it, 400 stating the cap', async () => {
    const s = await t.signIn();
    const g = await start(s.client, { ttl_seconds: 3600 });
    await credit(g.key);
    const ext = await s.client.request<Json>('POST', `/v1/ghost/sessions/${g.id}/extend`, { body: { seconds: 7200 } });
    expect(ext).toMatchObject({ seconds_remaining: 10_800, lifetime_seconds: 10_800, status: 'active' });
    t.clock.advance(3600_000); // past the first expiry: the extension holds on the key path too
    await credit(g.key);

    const e = await expectApiError(s.client.request('POST', `/v1/ghost/sessions/${g.id}/extend`, { body: { seconds: GHOST_MAX_LIFETIME_SECONDS - 10_800 + 1 } }), 400, 'invalid_request');
    expect(e.param).toBe('seconds');
    expect(e.message).toMatch(/24 hours/);
    expect(e.body?.error).toMatchObject({ max_lifetime_seconds: GHOST_MAX_LIFETIME_SECONDS, extendable_seconds: GHOST_MAX_LIFETIME_SECONDS - 10_800 });
    expect((await s.client.request<Json>('GET', `/v1/ghost/sessions/${g.id}`)).lifetime_seconds).toBe(10_800); // unchanged

    const full = await s.client.request<Json>('POST', `/v1/ghost/sessions/${g.id}/extend`, { body: { seconds: GHOST_MAX_LIFETIME_SECONDS - 10_800 } });
    expect(full.lifetime_seconds).toBe(GHOST_MAX_LIFETIME_SECONDS);
    expect(full.seconds_remaining).toBe(GHOST_MAX_LIFETIME_SECONDS - 3600);
    await expectApiError(s.client.request('POST', `/v1/ghost/sessions/${g.id}/extend`, { body: { seconds: 1 } }), 400, 'invalid_request');
    t.clock.advance((GHOST_MAX_LIFETIME_SECONDS - 3600) * 1000);
    await expectApiError(credit(g.key), 401, 'invalid_credential');
  });

  it('destroy revokes the key and purges the metadata', async () => {
    const s = await t.signIn();
    const keep = await start(s.client);
    const g = await start(s.client, { name: 'to forget' });
    const child = await asKey((await start(s.client, { scopes: ['keys:delegate', 'billing'] })).key).delegateKey(); // a ghost may delegate
    await credit(g.key);
    const d = await s.client.request<Json>('POST', `/v1/ghost/sessions/${g.id}/destroy`);
    expect(d).toEqual({ id: g.id, object: 'ghost_session', destroyed: true, key_id: g.key_id, revoked_ids: [g.key_id] });
    const e = await expectApiError(credit(g.key), 401, 'invalid_credential');
    expect(e.message).toMatch(/revoked/);
    const ids = (await list(s.client)).map((x) => x.id);
    expect(ids).not.toContain(g.id);
    expect(ids).toContain(keep.id);
    expect(JSON.stringify(await list(s.client))).not.toContain('to forget');
    expect(await t.gw.database.db.selectFrom('ghost_sessions').select('id').where('id', '=', g.id).executeTakeFirst()).toBeUndefined();
    await expectApiError(s.client.request('GET', `/v1/ghost/sessions/${g.id}`), 404, 'not_found');
    await expectApiError(s.client.request('POST', `/v1/ghost/sessions/${g.id}/destroy`), 404, 'not_found');
    await credit(keep.key);
    await asKey(child.key).delegateKey();

    const other = await t.signIn();
    await expectApiError(other.client.request('POST', `/v1/ghost/sessions/${keep.id}/destroy`), 404, 'not_found');
    await expectApiError(other.client.request('POST', `/v1/ghost/sessions/${keep.id}/extend`, { body: { seconds: 1 } }), 404, 'not_found');
    expect(await list(other.client)).toEqual([]);
  });

  it('validates input with a 400 naming the field, writing nothing', async () => {
    const s = await t.signIn();
    const before = await ghostRows();
    const cases: Array<[Json, string]> = [
      [{ ttl_seconds: GHOST_MAX_LIFETIME_SECONDS + 1 }, 'ttl_seconds'],
      [{ ttl_seconds: 0 }, 'ttl_seconds'],
      [{ scopes: ['everything'] }, 'scopes[0]'],
      [{ spend_cap_micro_usd: -1 }, 'spend_cap_micro_usd'],
    ];
    for (const [body, param] of cases) {
      const e = await expectApiError(s.client.request('POST', '/v1/ghost/sessions', { body }), 400, 'invalid_request');
      expect(e.param).toBe(param);
    }
    expect(await ghostRows()).toBe(before);
  });

  it(`holds ${MAX_LIVE_GHOSTS} live ghosts per account, also under concurrent starts; an expired or destroyed one frees its place`, async () => {
    const s = await t.signIn();
    const first = await start(s.client, { ttl_seconds: 60 });
    for (let i = 0; i < MAX_LIVE_GHOSTS - 3; i++) await start(s.client);
    const race = await Promise.allSettled(Array.from({ length: 5 }, () => start(s.client)));
    expect(race.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    const before = await ghostRows();
    const e = await expectApiError(start(s.client), 409, 'conflict');
    expect(e.body?.error).toMatchObject({ reason: 'ghost_limit', limit: MAX_LIVE_GHOSTS });
    expect(await ghostRows()).toBe(before);
    expect(await list(s.client)).toHaveLength(MAX_LIVE_GHOSTS);

    t.clock.advance(60_000); // the first one expires
    const next = await start(s.client);
    await expectApiError(start(s.client), 409, 'conflict');
    await s.client.request('POST', `/v1/ghost/sessions/${next.id}/destroy`);
    await start(s.client);
    expect((await s.client.request<Json>('GET', `/v1/ghost/sessions/${first.id}`)).status).toBe('expired');
  });
});
