import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomId } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { MAX_ROTATIONS } from '../control-plane/src/modules/keys/auth-row.ts';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ env: { SVC_KEY_ROTATION_GRACE_SECONDS: '3600' } });
});
afterAll(async () => t?.close());

const asKey = (secret: string) => new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: secret } });
const keyCount = async () =>
  Number((await t.gw.database.db.selectFrom('api_keys').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

describe('API key lifecycle', () => {
  it('mints a key whose secret is shown once and stored only as sha256', async () => {
    const s = await t.signIn();
    const k = await s.client.createKey({ name: 'ci', scopes: ['inference', 'keys:delegate'] });
    expect(k.key).toMatch(/^sk-svc_[A-Za-z0-9_-]{43}$/);
    expect(k.id).toMatch(/^key_/);
    expect(k.key.startsWith(k.prefix)).toBe(true);
    expect(k.status).toBe('active');
    const list = await s.client.listKeys();
    expect(list).toHaveLength(1);
    expect(JSON.stringify(list)).not.toContain(k.key);
    const row = await t.gw.database.db.selectFrom('api_keys').selectAll().where('id', '=', k.id).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(k.key);
    expect(row.secret_hash).toBe(createHash('sha256').update(k.key, 'utf8').digest('hex'));
  });

  it('validates input with a 400 that names the field, writing nothing', async () => {
    const s = await t.signIn();
    const before = await keyCount();
    const cases: Array<[unknown, string]> = [
      [{ scopes: ['everything'] }, 'scopes[0]'],
      [{ spend_cap_micro_usd: -5 }, 'spend_cap_micro_usd'],
      [{ spend_cap_micro_usd: 1.5 }, 'spend_cap_micro_usd'],
      [{ expires_at: 'tomorrow' }, 'expires_at'],
      [{ expires_at: new Date(t.clock.now().getTime() - 1000).toISOString() }, 'expires_at'],
      [{ name: 'x', surprise: true }, ''],
    ];
    for (const [body, param] of cases) {
      const e = await expectApiError(s.client.request('POST', '/v1/keys', { body }), 400, 'invalid_request');
      if (param) expect(e.param).toBe(param);
    }
    expect(await keyCount()).toBe(before);
  });

  it('revokes a key and its whole delegated subtree', async () => {
    const s = await t.signIn();
    const root = await s.client.createKey({ name: 'root' });
    const child = await asKey(root.key).delegateKey({ name: 'child' });
    const grandchild = await asKey(child.key).delegateKey({ name: 'grandchild' });
    const sibling = await s.client.createKey({ name: 'sibling' });
    expect(child.parent_id).toBe(root.id);
    expect(grandchild.parent_id).toBe(child.id);

    const r = await s.client.revokeKey(root.id);
    expect(r.revoked_ids.sort()).toEqual([root.id, child.id, grandchild.id].sort());
    for (const k of [root, child, grandchild]) {
      const e = await expectApiError(asKey(k.key).delegateKey(), 401, 'invalid_credential');
      expect(e.message).toMatch(/revoked/);
    }
    await asKey(sibling.key).delegateKey(); // untouched
    const statuses = Object.fromEntries((await s.client.listKeys()).map((k) => [k.id, k.status]));
    expect(statuses[root.id]).toBe('revoked');
    expect(statuses[grandchild.id]).toBe('revoked');
    expect(statuses[sibling.id]).toBe('active');
    expect((await s.client.revokeKey(root.id)).revoked_ids).toEqual([]); // idempotent
  });

  it('rotates scope-identically; the old key works through the grace window, then fails', async () => {
    const s = await t.signIn();
    const old = await s.client.createKey({ name: 'svc', scopes: ['keys:delegate', 'files'], spend_cap_micro_usd: 5_000_000 });
    const child = await asKey(old.key).delegateKey({ scopes: ['files'] });
    const fresh = await s.client.rotateKey(old.id, 600);
    expect(fresh.id).not.toBe(old.id);
    expect(fresh.scopes).toEqual(old.scopes);
    expect(fresh.spend_cap_micro_usd).toBe(5_000_000);
    expect(fresh.replaces.id).toBe(old.id);
    expect(new Date(fresh.replaces.expires_at).getTime()).toBe(t.clock.now().getTime() + 600_000);

    await asKey(old.key).delegateKey(); // within grace
    t.clock.advance(600_000);
    const e = await expectApiError(asKey(old.key).delegateKey(), 401, 'invalid_credential');
    expect(e.message).toContain(fresh.id);
    await asKey(fresh.key).delegateKey();
    // Children follow the live key, so revoking the replacement still cascades to them.
    const rev = await s.client.revokeKey(fresh.id);
    expect(rev.revoked_ids).toContain(child.id);
    await expectApiError(s.client.rotateKey(old.id), 409, 'conflict');
  });

  it('uses the configured grace window by default', async () => {
    const s = await t.signIn();
    const old = await s.client.createKey();
    const fresh = await s.client.rotateKey(old.id);
    expect(new Date(fresh.replaces.expires_at).getTime()).toBe(t.clock.now().getTime() + 3600_000);
    await expectApiError(s.client.rotateKey(old.id), 409, 'conflict');
  });

  it('expires keys at their expiry', async () => {
    const s = await t.signIn();
    const k = await s.client.createKey({ expires_at: new Date(t.clock.now().getTime() + 60_000).toISOString() });
    await asKey(k.key).delegateKey();
    t.clock.advance(60_000);
    const e = await expectApiError(asKey(k.key).delegateKey(), 401, 'invalid_credential');
    expect(e.message).toMatch(/expired/);
  });

  it('a frozen key answers 402 circuit_breaker_tripped until its owner unfreezes it', async () => {
    const s = await t.signIn();
    const k = await s.client.createKey();
    await t.gw.services.keys.freeze(k.id, 'spend rate over limit');
    const e = await expectApiError(asKey(k.key).delegateKey(), 402, 'circuit_breaker_tripped');
    expect(e.body?.error).not.toHaveProperty('accepts');
    expect((await s.client.listKeys()).find((x) => x.id === k.id)?.status).toBe('frozen');
    const other = await t.signIn();
    await expectApiError(other.client.unfreezeKey(k.id), 404, 'not_found');
    const u = await s.client.unfreezeKey(k.id);
    expect(u.was_frozen).toBe(true);
    expect(u.status).toBe('active');
    await asKey(k.key).delegateKey();
  });

  it("another account's key id is not found and nothing is written", async () => {
    const a = await t.signIn();
    const b = await t.signIn();
    const k = await a.client.createKey();
    const before = await keyCount();
    await expectApiError(b.client.revokeKey(k.id), 404, 'not_found');
    await expectApiError(b.client.rotateKey(k.id), 404, 'not_found');
    await expectApiError(b.client.revokeKey('key_doesnotexist'), 404, 'not_found');
    expect(await keyCount()).toBe(before);
    expect((await a.client.listKeys())[0]?.status).toBe('active');
    expect(await b.client.listKeys()).toEqual([]);
  });
});

const NOTARY_PRICE = 1_000; // the notary's default price per receipt
let seq = 0;
const notarize = async (secret: string) => {
  seq++;
  const res = await asKey(secret).raw('POST', '/v1/notary/receipts', { body: { input_sha256: sha(seq), output_sha256: sha(seq + 1e6) } });
  return { status: res.status, body: (await res.json()) as { error?: { type: string; key_id?: string } } };
};
const sha = (n: number) => n.toString(16).padStart(64, '0');
const keyRow = (id: string) => t.gw.database.db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

/** The list's [own, subtree] spend of every key; own spends are never negative and add up to what the account's keys were charged. */
async function expectSpend(s: { client: SvcClient; accountId: string }, want: Record<string, [number, number]>) {
  const list = await s.client.listKeys();
  expect(Object.fromEntries(list.map((k) => [k.id, [k.spent_micro_usd, k.subtree_spent_micro_usd]]))).toEqual(want);
  const charged = await t.gw.database.db
    .selectFrom('usage_events')
    .select((eb) => eb.fn.sum<number>('cost_micro_usd').as('s'))
    .where('account_id', '=', s.accountId)
    .executeTakeFirstOrThrow();
  expect(list.reduce((a, k) => a + k.spent_micro_usd, 0)).toBe(Number(charged.s ?? 0));
}

describe('rotation carries the spend accounting', () => {
  it('the replacement keeps the lifetime spend its cap counts, and the old secret spends against it', async () => {
    const s = await t.signIn();
    const old = await s.client.createKey({ name: 'capped', spend_cap_micro_usd: 5 * NOTARY_PRICE });
    const child = await asKey(old.key).delegateKey({ name: 'child' });
    for (let i = 0; i < 3; i++) expect((await notarize(child.key)).status).toBe(201);
    expect((await notarize(old.key)).status).toBe(201);
    const before = await keyRow(old.id);
    expect(before).toMatchObject({ spent_micro_usd: 4 * NOTARY_PRICE, window_spent_micro_usd: NOTARY_PRICE, held_micro_usd: 0 });

    const fresh = await s.client.rotateKey(old.id, 600);
    expect(fresh).toMatchObject({ spent_micro_usd: NOTARY_PRICE, subtree_spent_micro_usd: 4 * NOTARY_PRICE });
    // Moved, not copied: the breaker window too.
    const moved = await keyRow(fresh.id);
    expect(moved).toMatchObject({ spent_micro_usd: 4 * NOTARY_PRICE, held_micro_usd: 0, window_spent_micro_usd: NOTARY_PRICE, parent_id: null });
    expect(moved.window_start).toEqual(before.window_start);
    expect((await keyRow(old.id)).spent_micro_usd).toBe(0);
    expect((await keyRow(child.id)).parent_id).toBe(fresh.id);
    await expectSpend(s, { [fresh.id]: [NOTARY_PRICE, 4 * NOTARY_PRICE], [child.id]: [3 * NOTARY_PRICE, 3 * NOTARY_PRICE], [old.id]: [0, 0] });

    // Within its grace window the old secret acts as the replacement: charged to it, under its cap.
    expect((await notarize(old.key)).status).toBe(201);
    const last = await t.gw.database.db.selectFrom('usage_events').select('key_id').where('account_id', '=', s.accountId).orderBy('n', 'desc').executeTakeFirstOrThrow();
    expect(last.key_id).toBe(fresh.id);
    // 5 of 5 spent: the replacement, its moved child and the old secret all meet the cap the prior spend counts in.
    for (const secret of [fresh.key, child.key, old.key]) {
      const r = await notarize(secret);
      expect(r.status).toBe(402);
      expect(r.body.error).toMatchObject({ type: 'spend_cap_reached', key_id: fresh.id });
    }
    await expectSpend(s, { [fresh.id]: [2 * NOTARY_PRICE, 5 * NOTARY_PRICE], [child.id]: [3 * NOTARY_PRICE, 3 * NOTARY_PRICE], [old.id]: [0, 0] });
    // Revoking the replacement also ends the old secret's grace.
    expect((await s.client.revokeKey(fresh.id)).revoked_ids.sort()).toEqual([fresh.id, child.id, old.id].sort());
    await expectApiError(asKey(old.key).delegateKey(), 401, 'invalid_credential');
  });

  it('holds open at rotation settle on the chain they were made with: released, charged once, listed on the replacement', async () => {
    const s = await t.signIn();
    const old = await s.client.createKey({ spend_cap_micro_usd: 10 * NOTARY_PRICE });
    const child = await asKey(old.key).delegateKey();
    const { keys, metering } = t.gw.services;
    const hold = async (secret: string) =>
      metering.hold({ principal: await keys.authenticate(secret), requestId: `req_${randomId(20)}`, runId: null, maxCostMicroUsd: 2 * NOTARY_PRICE, route: 'POST /test', resource: t.url });
    const [viaChild, viaOld] = [await hold(child.key), await hold(old.key)];
    expect((await keyRow(old.id)).held_micro_usd).toBe(4 * NOTARY_PRICE);

    const fresh = await s.client.rotateKey(old.id);
    expect((await keyRow(fresh.id)).held_micro_usd).toBe(0);
    for (const h of [viaChild, viaOld]) await metering.settle(h, { costMicroUsd: NOTARY_PRICE, kind: 'test', units: {} });

    for (const id of [old.id, fresh.id, child.id]) expect((await keyRow(id)).held_micro_usd, id).toBe(0);
    expect((await keyRow(old.id)).spent_micro_usd).toBe(2 * NOTARY_PRICE);
    await expectSpend(s, { [fresh.id]: [NOTARY_PRICE, 2 * NOTARY_PRICE], [child.id]: [NOTARY_PRICE, NOTARY_PRICE], [old.id]: [0, 0] });
  });

  it('a principal resolved before a rotation (a stale auth cache) is held against the live keys, under their caps', async () => {
    const s = await t.signIn();
    const parent = await s.client.createKey({ spend_cap_micro_usd: 3 * NOTARY_PRICE });
    const child = await asKey(parent.key).delegateKey();
    const { keys, metering } = t.gw.services;
    // Resolved now, used after the rotation, as another process's cache would until the NOTIFY arrives.
    const [staleChild, staleParent] = [await keys.authenticate(child.key), await keys.authenticate(parent.key)];
    expect((await notarize(child.key)).status).toBe(201);
    const fresh = await s.client.rotateKey(parent.id);
    expect((await keyRow(parent.id)).spent_micro_usd).toBe(0); // moved to the replacement
    const hold = (principal: typeof staleChild, amount: number) =>
      metering.hold({ principal, requestId: `req_${randomId(20)}`, runId: null, maxCostMicroUsd: amount, route: 'POST /test', resource: t.url });
    const h = await hold(staleChild, NOTARY_PRICE);
    expect(h.chain).toEqual([child.id, fresh.id]);
    expect((await keyRow(fresh.id)).held_micro_usd).toBe(NOTARY_PRICE);
    expect((await keyRow(parent.id)).held_micro_usd).toBe(0);
    // The cap counts the spend the rotation moved: 1 spent + 1 held + 2 more would be 4 of 3.
    await expect(hold(staleParent, 2 * NOTARY_PRICE)).rejects.toMatchObject({ type: 'spend_cap_reached', extra: { key_id: fresh.id } });
    await metering.settle(h, { costMicroUsd: NOTARY_PRICE, kind: 'test', units: {} });
    expect(await keyRow(fresh.id)).toMatchObject({ spent_micro_usd: 2 * NOTARY_PRICE, held_micro_usd: 0 });
  });

  it(`a secret more than ${MAX_ROTATIONS} rotations from the live key is refused, not left acting as a retired key`, async () => {
    const s = await t.signIn();
    const first = await s.client.createKey({ spend_cap_micro_usd: NOTARY_PRICE });
    let id = first.id;
    const secrets: string[] = [first.key];
    for (let i = 0; i <= MAX_ROTATIONS; i++) {
      const next = await t.gw.services.keys.rotate(s.accountId, id, 3600);
      secrets.push(next.key);
      id = next.id;
    }
    await expectApiError(asKey(secrets[0]!).delegateKey(), 401, 'invalid_credential');
    // One rotation less deep acts as the live key.
    const child = await asKey(secrets[1]!).delegateKey();
    expect((await keyRow(child.id)).parent_id).toBe(id);
  });

  it('rotating a frozen key does not lift the freeze', async () => {
    const s = await t.signIn();
    const k = await s.client.createKey();
    await t.gw.services.keys.freeze(k.id, 'circuit breaker: test');
    const fresh = await s.client.rotateKey(k.id);
    expect(fresh.status).toBe('frozen');
    for (const secret of [fresh.key, k.key]) {
      const e = await expectApiError(asKey(secret).delegateKey(), 402, 'circuit_breaker_tripped');
      expect(e.body?.error.key_id).toBe(fresh.id);
    }
    await s.client.unfreezeKey(fresh.id);
    for (const secret of [fresh.key, k.key]) await asKey(secret).delegateKey();
  });
});

describe('delegated keys', () => {
  it("bounds a child's scopes, spend cap and expiry by the parent's", async () => {
    const s = await t.signIn();
    const expiry = new Date(t.clock.now().getTime() + 3600_000).toISOString();
    const parent = await s.client.createKey({ scopes: ['keys:delegate', 'inference'], spend_cap_micro_usd: 1_000_000, expires_at: expiry });
    const p = asKey(parent.key);
    const before = await keyCount();

    const scope = await expectApiError(p.delegateKey({ scopes: ['sandboxes'] }), 403, 'insufficient_scope');
    expect(scope.message).toContain('sandboxes');
    const cap = await expectApiError(p.delegateKey({ spend_cap_micro_usd: 1_000_001 }), 400, 'invalid_request');
    expect(cap.param).toBe('spend_cap_micro_usd');
    const exp = await expectApiError(p.delegateKey({ expires_at: new Date(t.clock.now().getTime() + 7200_000).toISOString() }), 400, 'invalid_request');
    expect(exp.param).toBe('expires_at');
    expect(await keyCount()).toBe(before);

    const child = await p.delegateKey({ scopes: ['inference'] });
    expect(child.scopes).toEqual(['inference']);
    expect(child.spend_cap_micro_usd).toBe(1_000_000); // inherits the parent's remaining cap
    expect(child.expires_at).toBe(expiry);
    // The child lacks keys:delegate, so it cannot mint further.
    const e = await expectApiError(asKey(child.key).delegateKey(), 403, 'insufficient_scope');
    expect(e.body?.error.required_scope).toBe('keys:delegate');
  });

  it('a key without the keys:delegate scope is refused with 403', async () => {
    const s = await t.signIn();
    const k = await s.client.createKey({ scopes: ['inference'] });
    await expectApiError(asKey(k.key).delegateKey(), 403, 'insufficient_scope');
  });

  it('lists subtree spend', async () => {
    const s = await t.signIn();
    const root = await s.client.createKey();
    const child = await asKey(root.key).delegateKey();
    await t.gw.database.db.updateTable('api_keys').set({ spent_micro_usd: 700 }).where('id', '=', child.id).execute();
    // Metering charges a key and each ancestor, so the root's column holds the subtree total.
    await t.gw.database.db.updateTable('api_keys').set({ spent_micro_usd: 1000 }).where('id', '=', root.id).execute();
    const list = await s.client.listKeys();
    expect(list.find((k) => k.id === root.id)?.subtree_spent_micro_usd).toBe(1000);
    expect(list.find((k) => k.id === root.id)?.spent_micro_usd).toBe(300);
    expect(list.find((k) => k.id === child.id)?.subtree_spent_micro_usd).toBe(700);
  });
});

describe('suspension', () => {
  it("refuses a suspended account's keys and sessions until lifted", async () => {
    const s = await t.signIn();
    const k = await s.client.createKey();
    const admin = new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: 'test-admin-token-0123456789' } });
    await admin.request('POST', '/v1/admin/accounts/suspend', { body: { account_id: s.accountId, suspended: true, reason: 'abuse report' } });
    await expectApiError(asKey(k.key).delegateKey(), 403, 'account_suspended');
    await expectApiError(s.client.me(), 403, 'account_suspended');
    await expectApiError(t.signIn(s.account), 403, 'account_suspended');
    await admin.request('POST', '/v1/admin/accounts/suspend', { body: { account_id: s.accountId, suspended: false } });
    await asKey(k.key).delegateKey();
    expect((await s.client.me()).account_id).toBe(s.accountId);
    await expectApiError(admin.request('POST', '/v1/admin/accounts/suspend', { body: { account_id: 'acct_nope', suspended: true } }), 404, 'not_found');
  });
});
