import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { canonicalize } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { fundedKey, type TestGateway } from './support/gateway.ts';
import type { TestUpstream } from './support/upstream.ts';
import { closeInferenceEnv, startInferenceEnv, user } from './support/inference-env.ts';
import { expectApiError } from './support/expect-error.ts';
import { chatLine, drain, readLines, sdk, uploadLines } from './support/batches.ts';
import { MAX_LIVE_MANDATES } from '../control-plane/src/modules/mandates/service.ts';

/**
 * Mandates end to end: a gateway with billing enforced whose provider is a real OpenAI-compatible server on
 * loopback (inference-env.ts), so a mandate key's requests are real metered calls.
 */
let up: TestUpstream;
let t: TestGateway;
beforeAll(async () => {
  ({ up, t } = await startInferenceEnv());
});
afterAll(() => closeInferenceEnv({ up, t }));
beforeEach(() => up.reset()); // its switches; `up.requests` keeps every request, so tests count from where they start

type Json = Record<string, any>;
const asKey = (secret: string) => new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: secret } });
const inDays = (d: number) => new Date(t.clock.now().getTime() + d * 86400_000).toISOString();
const chat = (secret: string, model: string, maxTokens = 8) => asKey(secret).request<Json>('POST', '/v1/chat/completions', { body: { model, messages: user('hi'), max_tokens: maxTokens } });
const count = async (table: 'mandates' | 'api_keys') =>
  Number((await t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

/** A funded account with a parent key. */
async function owner(parent: Json = {}) {
  const a = await fundedKey(t, 10_000_000);
  const p = await a.client.request<Json>('POST', '/v1/keys', { body: { name: 'parent', ...parent } });
  return { ...a, parent: p };
}

const terms = (parentId: string, extra: Json = {}) => ({
  parent_key_id: parentId,
  purpose: 'Summarize support tickets',
  spend_cap_micro_usd: 2_000,
  expires_at: inDays(7),
  scopes: ['inference'],
  allowed_models: ['test-chat'],
  allowed_routes: ['POST /v1/chat/completions'],
  ...extra,
});

describe('creating a mandate', () => {
  it('without a co-signature: a delegated, hashed, shown-once key and a gateway-signed document', async () => {
    const o = await owner();
    const m = await o.client.request<Json>('POST', '/v1/mandates', { body: terms(o.parent.id) });
    expect(m).toMatchObject({ object: 'mandate', status: 'active', parent_key_id: o.parent.id, owner: null, spend_cap_micro_usd: 2_000, spent_micro_usd: 0, scopes: ['inference'] });
    expect(m.id).toMatch(/^mdt_[0-9a-z]{24}$/);
    expect(m.key).toMatch(/^sk-svc_/);
    expect(m.document).toEqual({
      type: 'svc.mandate',
      version: 1,
      mandate_id: m.id,
      account_id: o.accountId,
      parent_key_id: o.parent.id,
      purpose: 'Summarize support tickets',
      scopes: ['inference'],
      spend_cap_micro_usd: 2_000,
      expires_at: m.expires_at,
      allowed_models: ['test-chat'],
      allowed_routes: ['POST /v1/chat/completions'],
      gateway: t.gw.services.signer.address,
    });
    expect(m.canonical).toBe(canonicalize(m.document));
    expect(verifyMessage(m.canonical, m.signature)).toBe(t.gw.services.signer.address);

    // The key is a delegated child of the parent, bounded like the mandate; stored as sha256 only; listed without its secret.
    const key = (await o.client.listKeys()).find((k) => k.id === m.key_id) as unknown as Json;
    expect(key).toMatchObject({ parent_id: o.parent.id, spend_cap_micro_usd: 2_000, managed_by: 'mandate', allowed_models: ['test-chat'], allowed_routes: ['POST /v1/chat/completions'] });
    const row = await t.gw.database.db.selectFrom('api_keys').selectAll().where('id', '=', m.key_id).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(m.key);
    const listed = await o.client.request<Json>('GET', '/v1/mandates');
    expect(listed.mandates.map((x: Json) => x.id)).toEqual([m.id]);
    expect(JSON.stringify(listed)).not.toContain(m.key);
    // A mandate key is never rotated: revoked through its mandate, replaced by a new one.
    await expectApiError(o.client.rotateKey(m.key_id), 409, 'conflict');
  });

  it("co-signed by a linked wallet over the prepared document's canonical text; an unlinked wallet is refused", async () => {
    const o = await owner();
    const linked = privateKeyToAccount(generatePrivateKey());
    await o.client.linkWallet(linked, { issuedAt: t.clock.now() });
    const stranger = privateKeyToAccount(generatePrivateKey());

    const before = { mandates: await count('mandates'), keys: await count('api_keys') };
    const prep = await o.client.request<Json>('POST', '/v1/mandates', { body: { ...terms(o.parent.id), prepare: true } });
    expect(prep).toMatchObject({ object: 'mandate_terms', scheme: 'eip191-personal_sign/rfc8785' });
    expect(prep.linked_wallets).toEqual(expect.arrayContaining([o.account.address, linked.address]));
    expect(prep.canonical).toBe(canonicalize(prep.document));
    expect(prep.document.mandate_id).toBe(prep.mandate_id);

    // A wallet not linked to the account: refused, nothing written.
    const bad = await stranger.signMessage({ message: prep.canonical });
    const e = await expectApiError(o.client.request('POST', '/v1/mandates', { body: { ...terms(o.parent.id), mandate_id: prep.mandate_id, owner_signature: bad } }), 403, 'forbidden');
    expect(e.param).toBe('owner_signature');
    expect(e.body?.error.recovered_address).toBe(stranger.address);
    // The linked wallet's signature, but over other terms than those sent: it recovers to someone else.
    const good = await linked.signMessage({ message: prep.canonical });
    await expectApiError(o.client.request('POST', '/v1/mandates', { body: { ...terms(o.parent.id, { spend_cap_micro_usd: 3_000 }), mandate_id: prep.mandate_id, owner_signature: good } }), 403, 'forbidden');
    await expectApiError(o.client.request('POST', '/v1/mandates', { body: { ...terms(o.parent.id), mandate_id: prep.mandate_id, owner_signature: '0x1234' } }), 400, 'invalid_request');
    expect({ mandates: await count('mandates'), keys: await count('api_keys') }).toEqual(before);

    const m = await o.client.request<Json>('POST', '/v1/mandates', { body: { ...terms(o.parent.id), mandate_id: prep.mandate_id, owner_signature: good } });
    expect(m.id).toBe(prep.mandate_id);
    expect(m.canonical).toBe(prep.canonical); // both parties signed the same bytes
    expect(m.owner).toEqual({ address: linked.address, signature: good });
    expect(verifyMessage(m.canonical, m.owner.signature)).toBe(linked.address);
    expect(verifyMessage(m.canonical, m.signature)).toBe(t.gw.services.signer.address);
    // The same signed terms cannot make a second mandate.
    const again = await expectApiError(o.client.request('POST', '/v1/mandates', { body: { ...terms(o.parent.id), mandate_id: prep.mandate_id, owner_signature: good } }), 409, 'conflict');
    expect(again.param).toBe('mandate_id');
  });
});

describe("the mandate key's bounds", () => {
  it('works within its model and route lists; refused outside them (403) and over its cap (402)', async () => {
    const o = await owner();
    const m = await o.client.request<Json>('POST', '/v1/mandates', { body: terms(o.parent.id, { spend_cap_micro_usd: 500 }) });
    const seen = up.requests.length;
    const ok = await chat(m.key, 'test-chat');
    expect(ok.choices[0].message.content).toBeTruthy();
    expect(up.requests.length).toBe(seen + 1);

    const model = await expectApiError(chat(m.key, 'test-reasoning'), 403, 'model_not_allowed');
    expect(model.body?.error).toMatchObject({ param: 'model', model: 'test-reasoning', allowed_models: ['test-chat'] });
    const route = await expectApiError(asKey(m.key).request('POST', '/v1/embeddings', { body: { model: 'test-chat', input: 'x' } }), 403, 'route_not_allowed');
    expect(route.body?.error).toMatchObject({ route: 'POST /v1/embeddings', allowed_routes: ['POST /v1/chat/completions'] });
    expect(up.requests.length).toBe(seen + 1); // neither refusal reached the provider

    // The worst case of 1000 output tokens (5 micro-USD each) is past what is left of the 500 cap.
    const cap = await expectApiError(chat(m.key, 'test-chat', 1000), 402, 'spend_cap_reached');
    expect(cap.body?.error).not.toHaveProperty('accepts');
    await t.gw.services.metering.settledAll();
    const [listed] = (await o.client.request<Json>('GET', '/v1/mandates')).mandates;
    expect(listed.spent_micro_usd).toBeGreaterThan(0);
    expect(listed.remaining_micro_usd).toBe(500 - listed.spent_micro_usd);
  });

  it('carries a policy, added to its parent key\'s: a blocklisted prompt never reaches the provider, and receipts carry the stamp', async () => {
    const o = await owner();
    const rules = await o.client.request<Json>('POST', '/v1/guardrails', { body: { detectors: [{ type: 'blocklist', terms: ['project nightingale'], input: 'block', output: 'allow' }] } });
    const m = await o.client.request<Json>('POST', '/v1/mandates', { body: terms(o.parent.id, { policy: { guardrails: [rules.id] } }) });
    const key = (await o.client.request<Json[]>('GET', '/v1/keys')).find((k) => k.id === m.key_id)!;
    expect(key.policy_id).toMatch(/./);
    const seen = up.requests.length;
    await expectApiError(asKey(m.key).request('POST', '/v1/chat/completions', { body: { model: 'test-chat', messages: user('tell me about Project Nightingale'), max_tokens: 8 } }), 400, 'guardrail_blocked');
    expect(up.requests.length).toBe(seen);
    const res = await asKey(m.key).raw('POST', '/v1/chat/completions', { body: { model: 'test-chat', messages: user('hi'), max_tokens: 8 } });
    expect(res.status).toBe(200);
    const payload = JSON.parse(Buffer.from(res.headers.get('x-svc-receipt')!, 'base64url').toString('utf8')) as Json;
    expect(payload.policy).toMatchObject({ id: key.policy_id });
    // Another account's rule set cannot be named.
    const other = await owner();
    const e = await expectApiError(other.client.request('POST', '/v1/mandates', { body: terms(other.parent.id, { policy: { guardrails: [rules.id] } }) }), 400, 'invalid_request');
    expect(e.param).toBe('policy.guardrails[0]');
  });

  it('keys delegated below a mandate key stay within its lists; the mandate expires with its key', async () => {
    const o = await owner();
    const m = await o.client.request<Json>('POST', '/v1/mandates', {
      body: terms(o.parent.id, { scopes: ['inference', 'keys:delegate'], allowed_routes: ['/v1/chat/completions', 'POST /v1/keys/delegate'], expires_at: new Date(t.clock.now().getTime() + 3600_000).toISOString() }),
    });
    const child = await asKey(m.key).delegateKey({ name: 'worker' });
    await chat(child.key, 'test-chat');
    await expectApiError(chat(child.key, 'test-reasoning'), 403, 'model_not_allowed');
    await expectApiError(asKey(child.key).request('POST', '/v1/embeddings', { body: { model: 'test-embed', input: 'x' } }), 403, 'route_not_allowed');

    t.clock.advance(3600_000);
    const e = await expectApiError(chat(m.key, 'test-chat'), 401, 'invalid_credential');
    expect(e.message).toMatch(/expired/);
    expect((await o.client.request<Json>('GET', '/v1/mandates')).mandates[0].status).toBe('expired');
  });
});

describe('batch lines run later under a mandate key', () => {
  it('are held to its model list as a request is', async () => {
    const o = await owner();
    const m = await o.client.request<Json>('POST', '/v1/mandates', { body: terms(o.parent.id, { scopes: ['inference', 'files'], allowed_routes: undefined, spend_cap_micro_usd: 100_000 }) });
    const oa = sdk(t, m.key);
    const seen = up.requests.length;
    const input = await uploadLines(oa, [chatLine('in'), chatLine('out', 'question', 'test-reasoning')]);
    const batch = await oa.batches.create({ input_file_id: input.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    const done = await drain(t, oa, batch.id);
    expect(done.request_counts).toMatchObject({ total: 2, completed: 1, failed: 1 });
    const [failed] = await readLines(oa, done.error_file_id);
    expect(failed).toMatchObject({ custom_id: 'out', response: { status_code: 403, body: { error: { type: 'model_not_allowed', model: 'test-reasoning' } } } });
    expect(up.requests.slice(seen).map((r) => r.body.model)).toEqual(['test-chat']);
  });
});

describe('proofs and revocation', () => {
  it('the proof verifies with ethers and POST /v1/receipts/verify, and states bounds and status at the time; revocation kills the subtree', async () => {
    const o = await owner();
    const linked = privateKeyToAccount(generatePrivateKey());
    await o.client.linkWallet(linked, { issuedAt: t.clock.now() });
    const body = terms(o.parent.id, { scopes: ['inference', 'keys:delegate'], allowed_routes: undefined });
    const prep = await o.client.request<Json>('POST', '/v1/mandates', { body: { ...body, prepare: true } });
    const m = await o.client.request<Json>('POST', '/v1/mandates', { body: { ...body, mandate_id: prep.mandate_id, owner_signature: await linked.signMessage({ message: prep.canonical }) } });
    const child = await asKey(m.key).delegateKey();
    const grandchild = await asKey(child.key).delegateKey();
    await chat(grandchild.key, 'test-chat');
    await t.gw.services.metering.settledAll();

    const p = await o.client.request<Json>('POST', `/v1/mandates/${m.id}/proof`);
    expect(p.proof).toMatchObject({
      type: 'svc.mandate_proof',
      mandate_id: m.id,
      account_id: o.accountId,
      key_id: m.key_id,
      status: 'active',
      mandate: m.document,
      mandate_signature: m.signature,
      owner: { address: linked.address },
      bounds: { spend_cap_micro_usd: 2_000, expires_at: m.expires_at, scopes: ['inference', 'keys:delegate'], allowed_models: ['test-chat'], allowed_routes: null },
      revoked_at: null,
      generated_at: t.clock.now().toISOString(),
    });
    expect(p.proof.bounds.spent_micro_usd).toBeGreaterThan(0); // the grandchild's spend counts against the mandate
    expect(p.proof.bounds.remaining_micro_usd).toBe(2_000 - p.proof.bounds.spent_micro_usd);
    // Any Ethereum library: the certificate, the mandate document inside it, and the owner's co-signature.
    expect(p.canonical).toBe(canonicalize(p.proof));
    expect(verifyMessage(p.canonical, p.signature)).toBe(t.gw.services.signer.address);
    expect(verifyMessage(canonicalize(p.proof.mandate), p.proof.mandate_signature)).toBe(t.gw.services.signer.address);
    expect(verifyMessage(canonicalize(p.proof.mandate), p.proof.owner.signature)).toBe(linked.address);
    // The gateway's public verifier, with nothing but the certificate and its signature.
    const v = await t.client.request<Json>('POST', '/v1/receipts/verify', { body: { receipt: p.proof, signature: p.signature }, credential: null });
    expect(v).toEqual({ valid: true, recovered_address: t.gw.services.signer.address, payload: p.proof });
    const forged = await t.client.request<Json>('POST', '/v1/receipts/verify', { body: { receipt: { ...p.proof, bounds: { ...p.proof.bounds, spend_cap_micro_usd: 9e9 } }, signature: p.signature }, credential: null });
    expect(forged.valid).toBe(false);

    const r = await o.client.request<Json>('DELETE', `/v1/mandates/${m.id}`);
    expect(r.revoked_ids.sort()).toEqual([m.key_id, child.id, grandchild.id].sort());
    for (const k of [m.key, child.key, grandchild.key]) {
      const e = await expectApiError(chat(k, 'test-chat'), 401, 'invalid_credential');
      expect(e.message).toMatch(/revoked/);
    }
    expect((await o.client.request<Json>('DELETE', `/v1/mandates/${m.id}`)).revoked_ids).toEqual([]); // idempotent
    await chat(o.parent.key, 'test-chat'); // the parent is untouched
    expect((await o.client.listKeys()).find((k) => k.id === o.parent.id)?.status).toBe('active');

    const after = await o.client.request<Json>('POST', `/v1/mandates/${m.id}/proof`);
    expect(after.proof).toMatchObject({ status: 'revoked', revoked_at: t.clock.now().toISOString() });
    expect(verifyMessage(after.canonical, after.signature)).toBe(t.gw.services.signer.address);
    expect((await o.client.request<Json>('GET', '/v1/mandates')).mandates[0].status).toBe('revoked');
  });

  it("another account's mandate is not found, and nothing changes", async () => {
    const a = await owner();
    const b = await owner();
    const m = await a.client.request<Json>('POST', '/v1/mandates', { body: terms(a.parent.id) });
    await expectApiError(b.client.request('DELETE', `/v1/mandates/${m.id}`), 404, 'not_found');
    await expectApiError(b.client.request('POST', `/v1/mandates/${m.id}/proof`), 404, 'not_found');
    expect((await b.client.request<Json>('GET', '/v1/mandates')).mandates).toEqual([]);
    // Another account's key is no parent.
    const e = await expectApiError(b.client.request('POST', '/v1/mandates', { body: terms(a.parent.id) }), 400, 'invalid_request');
    expect(e.param).toBe('parent_key_id');
    await chat(m.key, 'test-chat');
  });
});

describe('bad input', () => {
  it("400 naming the field, nothing written: cap above the parent's, expiry beyond it, scopes it lacks, lists outside its own", async () => {
    const o = await owner({ scopes: ['inference', 'keys:delegate'], spend_cap_micro_usd: 5_000, expires_at: inDays(3) });
    const within = (parent: string, extra: Json = {}) => terms(parent, { expires_at: inDays(2), ...extra });
    const narrow = await o.client.request<Json>('POST', '/v1/mandates', { body: within(o.parent.id, { spend_cap_micro_usd: 1_000 }) });
    const before = { mandates: await count('mandates'), keys: await count('api_keys') };
    const cases: Array<[Json, string]> = [
      [within(o.parent.id, { spend_cap_micro_usd: 5_001 }), 'spend_cap_micro_usd'], // above what the parent has left of its 5_000
      [within(o.parent.id, { expires_at: inDays(4) }), 'expires_at'], // the parent expires in 3 days
      [within(o.parent.id, { expires_at: new Date(t.clock.now().getTime() - 1000).toISOString() }), 'expires_at'],
      [within(o.parent.id, { scopes: ['inference', 'files'] }), 'scopes'],
      [within(o.parent.id, { allowed_routes: ['POST /v1/nowhere'] }), 'allowed_routes[0]'],
      [within(o.parent.id, { allowed_routes: ['/v1/chat/completions', 'not a route'] }), 'allowed_routes[1]'],
      [within(o.parent.id, { allowed_routes: ['GET /v1/keys'] }), 'allowed_routes[0]'], // a session route: no key calls it
      [within('key_doesnotexist'), 'parent_key_id'],
      [within(o.parent.id, { spend_cap_micro_usd: -1 }), 'spend_cap_micro_usd'],
      [within(o.parent.id, { purpose: '' }), 'purpose'],
      [within(o.parent.id, { scopes: ['everything'] }), 'scopes[0]'],
      [{ ...within(o.parent.id), mandate_id: 'mdt_000000000000000000000000' }, 'owner_signature'],
      [{ ...within(o.parent.id), owner_signature: '0x00' }, 'mandate_id'],
      // Below a mandate key, the child mandate's lists stay within the parent's.
      [within(narrow.key_id, { spend_cap_micro_usd: 100, allowed_models: ['test-chat', 'test-reasoning'] }), 'allowed_models'],
      [within(narrow.key_id, { spend_cap_micro_usd: 100, allowed_routes: ['/v1/embeddings'] }), 'allowed_routes[0]'],
    ];
    for (const [body, param] of cases) {
      const e = await expectApiError(o.client.request('POST', '/v1/mandates', { body }), 400, 'invalid_request');
      expect({ body, param: e.param }).toEqual({ body, param });
    }
    expect({ mandates: await count('mandates'), keys: await count('api_keys') }).toEqual(before);
    // A revoked parent is no parent.
    await o.client.revokeKey(o.parent.id);
    const e = await expectApiError(o.client.request('POST', '/v1/mandates', { body: terms(o.parent.id) }), 400, 'invalid_request');
    expect(e.param).toBe('parent_key_id');
    // A mandate below a mandate key takes its lists when it names none.
    const o2 = await owner();
    const top = await o2.client.request<Json>('POST', '/v1/mandates', { body: terms(o2.parent.id) });
    const below = await o2.client.request<Json>('POST', '/v1/mandates', { body: terms(top.key_id, { allowed_models: undefined, allowed_routes: undefined, spend_cap_micro_usd: 100 }) });
    expect(below.document).toMatchObject({ allowed_models: ['test-chat'], allowed_routes: ['POST /v1/chat/completions'] });
  });
});

describe('the per-account limit', () => {
  it(`holds ${MAX_LIVE_MANDATES} live mandates, also under concurrent creations; a revoked one frees its place`, async () => {
    const o = await owner();
    const small = terms(o.parent.id, { spend_cap_micro_usd: 1, allowed_models: undefined, allowed_routes: undefined });
    for (let i = 0; i < MAX_LIVE_MANDATES - 2; i++) await o.client.request('POST', '/v1/mandates', { body: small });
    const race = await Promise.allSettled(Array.from({ length: 5 }, () => o.client.request<Json>('POST', '/v1/mandates', { body: small })));
    expect(race.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    const before = { mandates: await count('mandates'), keys: await count('api_keys') };
    const e = await expectApiError(o.client.request('POST', '/v1/mandates', { body: small }), 409, 'conflict');
    expect(e.body?.error).toMatchObject({ reason: 'mandate_limit', limit: MAX_LIVE_MANDATES });
    expect({ mandates: await count('mandates'), keys: await count('api_keys') }).toEqual(before);
    const list = (await o.client.request<Json>('GET', '/v1/mandates')).mandates;
    expect(list).toHaveLength(MAX_LIVE_MANDATES);
    await o.client.request('DELETE', `/v1/mandates/${list[0].id}`);
    await o.client.request('POST', '/v1/mandates', { body: small });
  });
});
