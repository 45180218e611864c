import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { newId } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { CHALLENGE_TTL_MS, MAX_PASSKEYS } from '../control-plane/src/modules/passkeys/checks.ts';
import { insertPasskey } from '../control-plane/src/modules/passkeys/store.ts';
import { expectApiError } from './support/expect-error.ts';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { launchChromium, openDevice, type Device } from './support/browser.ts';

/**
 * Passkeys end to end, with a real browser's WebAuthn: Chromium with a DevTools virtual authenticator (a
 * platform authenticator with user verification) on a page of the gateway's own origin. The gateway runs on
 * http://localhost:PORT (a secure context), which is both its public URL and its passkey origin.
 */
interface Passkey { id: string; object: string; name: string; credential_id: string; transports: string[]; device_type: string; backed_up: boolean; aaguid: string; created_at: string; last_used_at: string | null }
interface SignIn { token: string; session_id: string; account_id: string; wallet_address: string; expires_at: string; created_account: boolean }
type Json = Record<string, any>;
interface User { client: SvcClient; account: PrivateKeyAccount; accountId: string; token: string }

const ROUTES = [
  ['POST', '/v1/auth/passkey/login/options'],
  ['POST', '/v1/auth/passkey/login/verify'],
  ['POST', '/v1/auth/passkey/register/options'],
  ['POST', '/v1/auth/passkey/register/verify'],
  ['GET', '/v1/auth/passkeys'],
  ['PATCH', '/v1/auth/passkeys/:id'],
  ['DELETE', '/v1/auth/passkeys/:id'],
] as const;

let t: TestGateway;
let base: string; // http://localhost:PORT: public URL, passkey origin, and the browser's page
let anon: SvcClient;
let browser: Browser;
let context: BrowserContext;
let deviceA: Device; // alice's laptop: holds her one passkey
let alice: User;
let bob: User;
let aliceKey: Passkey;
let passkeySession: string; // a session the passkey signed in

const api = <T = Json>(c: SvcClient, method: string, path: string, body?: unknown) => c.request<T>(method, path, body === undefined ? {} : { body });
const b64 = (s: string) => Buffer.from(s, 'base64url');
const loginOptions = () => api(anon, 'POST', '/v1/auth/passkey/login/options', {});
const loginVerify = (credential: unknown, c = anon) => api<SignIn>(c, 'POST', '/v1/auth/passkey/login/verify', { credential });
const registerOptions = (u: User) => api(u.client, 'POST', '/v1/auth/passkey/register/options', {});
const registerVerify = (u: User, credential: unknown, name?: string) => api<Passkey>(u.client, 'POST', '/v1/auth/passkey/register/verify', name === undefined ? { credential } : { credential, name });
const count = async (table: 'passkeys' | 'sessions' | 'passkey_challenges') =>
  Number((await t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
const storedKey = (credentialId: string) => t.gw.database.db.selectFrom('passkeys').selectAll().where('credential_id', '=', credentialId).executeTakeFirstOrThrow();

/** Expects a 401 invalid_passkey refusal for `reason`. */
async function refused(p: Promise<unknown>, reason: string) {
  const e = await expectApiError(p, 401, 'invalid_passkey');
  expect(e.body?.error.reason, e.message).toBe(reason);
  return e;
}

async function signIn(account = privateKeyToAccount(generatePrivateKey())): Promise<User> {
  const { client, session } = await anon.signIn(account, { issuedAt: t.clock.now() });
  return { client, account, accountId: session.account_id, token: session.token };
}

/** A SIWE sign-in through the raw API: its body and Set-Cookie, to hold a passkey sign-in against. */
async function siwe(account: PrivateKeyAccount): Promise<{ body: SignIn; cookie: string }> {
  const { nonce } = await anon.nonce();
  const message = anon.siweMessage(account.address, nonce, { issuedAt: t.clock.now() });
  const res = await anon.raw('POST', '/v1/auth/verify', { body: { message, signature: await account.signMessage({ message }) }, credential: null });
  expect(res.status).toBe(200);
  return { body: (await res.json()) as SignIn, cookie: res.headers.get('set-cookie')! };
}

/** A copy of an assertion with its client data changed (the signature no longer covers it). */
function withClientData(assertion: Json, change: (cd: Json) => void): Json {
  const cd = JSON.parse(b64(assertion.response.clientDataJSON).toString('utf8'));
  change(cd);
  return { ...assertion, response: { ...assertion.response, clientDataJSON: Buffer.from(JSON.stringify(cd)).toString('base64url') } };
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://localhost:${port}`;
  // The test gateway's passkey settings are SVC_PASSKEY_RP_ID=localhost, SVC_PASSKEY_ORIGIN=http://localhost:PORT.
  t = await startTestGateway({ port, env: { SVC_PUBLIC_URL: base } });
  anon = new SvcClient({ baseUrl: base });
  browser = await launchChromium();
  context = await browser.newContext();
  deviceA = await openDevice(context, base);
  [alice, bob] = [await signIn(), await signIn()];
});
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('passkeys', () => {
  it('are offered: capabilities say so, and the seven routes are documented with their auth', async () => {
    expect(await api(anon, 'GET', '/v1/auth/capabilities')).toEqual({ siwe: true, passkey: true, session_cookie: true });
    const doc = (await (await fetch(`${base}/openapi.json`)).json()) as { paths: Record<string, Record<string, { security: unknown[] }>> };
    for (const [m, p] of ROUTES) {
      const op = doc.paths[p.replace(':id', '{id}')]?.[m.toLowerCase()];
      expect(op, `${m} ${p}`).toBeDefined();
      expect(op!.security.length > 0, `${m} ${p}`).toBe(!p.includes('/login/'));
    }
  });

  it('registers a passkey from the browser on a SIWE-signed-in account, lists metadata only, and renames it', async () => {
    const options = await registerOptions(alice);
    expect(options.rp).toEqual({ id: 'localhost', name: 'svc gateway' });
    expect(options.authenticatorSelection).toMatchObject({ residentKey: 'required', userVerification: 'required' });
    expect(options.timeout).toBe(CHALLENGE_TTL_MS);
    expect(b64(options.user.id).toString()).toBe(alice.accountId);
    expect(options.user.name).toBe(alice.account.address);
    expect(await count('passkey_challenges')).toBeGreaterThan(0);
    expect(await t.gw.database.db.selectFrom('passkey_challenges').select('challenge_hash').where('challenge_hash', '=', options.challenge).executeTakeFirst()).toBeUndefined();

    const credential = await deviceA.create(options);
    aliceKey = await registerVerify(alice, credential, '  Laptop  ');
    expect(aliceKey).toMatchObject({ object: 'passkey', name: 'Laptop', credential_id: credential.id, transports: ['internal'], device_type: 'single_device', backed_up: false, last_used_at: null });
    expect(aliceKey.id).toMatch(/^passkey_/);

    const list = await api<Passkey[]>(alice.client, 'GET', '/v1/auth/passkeys');
    expect(list).toEqual([aliceKey]);
    const row = await storedKey(credential.id);
    expect(row.public_key.length).toBeGreaterThan(32);
    expect(JSON.stringify(list)).not.toContain(Buffer.from(row.public_key).toString('base64url').slice(0, 40));
    expect(row.counter).toBe((await deviceA.credentials())[0]!.signCount);
    expect(await api<Passkey[]>(bob.client, 'GET', '/v1/auth/passkeys')).toEqual([]);

    // The registration's challenge is spent: the same response again is refused, and nothing is added.
    await refused(registerVerify(alice, credential), 'challenge');
    expect(await count('passkeys')).toBe(1);

    const renamed = await api<Passkey>(alice.client, 'PATCH', `/v1/auth/passkeys/${aliceKey.id}`, { name: '  Work laptop ' });
    expect(renamed).toEqual({ ...aliceKey, name: 'Work laptop' });
    aliceKey = renamed;
    for (const [name, why] of [['   ', 'blank'], ['x'.repeat(65), 'too long'], ['a\u0007b', 'control character']] as const) {
      const e = await expectApiError(api(alice.client, 'PATCH', `/v1/auth/passkeys/${aliceKey.id}`, { name }), 400, 'invalid_request');
      expect(e.param, why).toBe('name');
    }
    expect((await expectApiError(api(alice.client, 'PATCH', `/v1/auth/passkeys/${aliceKey.id}`, {}), 400, 'invalid_request')).param).toBe('name');
    expect((await expectApiError(api(alice.client, 'PATCH', `/v1/auth/passkeys/${aliceKey.id}`, { name: 'x', extra: 1 }), 400, 'invalid_request')).param).toBe('extra');
    // Another account's passkey is the same 404 as none.
    const theirs = await expectApiError(api(bob.client, 'PATCH', `/v1/auth/passkeys/${aliceKey.id}`, { name: 'mine' }), 404, 'not_found');
    const none = await expectApiError(api(bob.client, 'PATCH', '/v1/auth/passkeys/passkey_none', { name: 'mine' }), 404, 'not_found');
    expect(theirs.message).toBe(none.message);
    await expectApiError(api(bob.client, 'DELETE', `/v1/auth/passkeys/${aliceKey.id}`), 404, 'not_found');
    expect((await storedKey(credential.id)).name).toBe('Work laptop');
  });

  it('signs in with the passkey in the browser, with no account named: the session and cookie SIWE gives, usable on session routes', async () => {
    await api(alice.client, 'POST', '/v1/auth/logout');
    await expectApiError(api(alice.client, 'GET', '/v1/auth/me'), 401, 'invalid_credential');

    const r = await deviceA.run(async () => {
      const w = globalThis as any;
      const post = (path: string, body: unknown) => fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const options = await (await post('/v1/auth/passkey/login/options', {})).json();
      const cred = await w.navigator.credentials.get({ publicKey: w.PublicKeyCredential.parseRequestOptionsFromJSON(options) });
      const res = await post('/v1/auth/passkey/login/verify', { credential: cred.toJSON() });
      const session = await res.json();
      // The cookie alone: a read, and an unsafe request from the gateway's own origin.
      const me = await (await fetch('/v1/auth/me')).json();
      const unsafe = await post('/v1/auth/passkey/register/options', {});
      return { options: options as Json, status: res.status, session: session as SignIn, me: me as Json, unsafe: unsafe.status };
    }, null);
    expect(r.options.allowCredentials ?? []).toEqual([]);
    expect(r.options).toMatchObject({ rpId: 'localhost', userVerification: 'required', timeout: CHALLENGE_TTL_MS });
    expect(r.status).toBe(200);
    const session = r.session as SignIn;
    expect(session).toMatchObject({ account_id: alice.accountId, wallet_address: alice.account.address, created_account: false });
    expect(session.token).toMatch(/^sess_/);
    expect(r.me).toEqual({ account_id: alice.accountId, wallet_address: alice.account.address });
    expect(r.unsafe).toBe(200);
    const cookie = (await context.cookies(base)).find((c) => c.name === 'svc_session');
    expect(cookie).toMatchObject({ value: session.token, httpOnly: true, sameSite: 'Lax', path: '/', secure: false });
    passkeySession = session.token;
    alice = { ...alice, client: anon.withCredential({ kind: 'session', token: session.token }), token: session.token };
    expect(await api(alice.client, 'GET', '/v1/auth/me')).toEqual({ account_id: alice.accountId, wallet_address: alice.account.address });

    // Used: counter and time recorded.
    const row = await storedKey(aliceKey.credential_id);
    expect(row.counter).toBe((await deviceA.credentials())[0]!.signCount);
    expect(row.last_used_at?.toISOString()).toBe(t.clock.now().toISOString());
    // The session names no wallet (none signed); GET /v1/auth/sessions shows it as such.
    const sessions = await api<Array<{ id: string; current: boolean; wallet_address: string | null }>>(alice.client, 'GET', '/v1/auth/sessions');
    expect(sessions.find((s) => s.current)).toMatchObject({ id: session.session_id, wallet_address: null });
  });

  it('answers exactly the SIWE shape and Set-Cookie; a replayed assertion is refused', async () => {
    const assertion = await deviceA.get(await loginOptions());
    const res = await anon.raw('POST', '/v1/auth/passkey/login/verify', { body: { credential: assertion }, credential: null });
    expect(res.status).toBe(200);
    const body = (await res.json()) as SignIn;
    const viaSiwe = await siwe(alice.account);
    expect(Object.keys(body).sort()).toEqual(Object.keys(viaSiwe.body).sort());
    expect(body.wallet_address).toBe(viaSiwe.body.wallet_address);
    expect(body.account_id).toBe(viaSiwe.body.account_id);
    expect(res.headers.get('set-cookie')!.replace(body.token, 'TOKEN')).toBe(viaSiwe.cookie.replace(viaSiwe.body.token, 'TOKEN'));

    const sessions = await count('sessions');
    const counter = (await storedKey(aliceKey.credential_id)).counter;
    await refused(loginVerify(assertion), 'challenge');
    expect(await count('sessions')).toBe(sessions);
    expect((await storedKey(aliceKey.credential_id)).counter).toBe(counter);
  });

  it('a challenge is single-use, expires after 5 minutes, and is bound to its ceremony and account', async () => {
    // Two ceremonies on one set of options: the first signs in, the second is refused.
    const options = await loginOptions();
    const first = await deviceA.get(options);
    const second = await deviceA.get(options);
    expect(second.response.signature).not.toBe(first.response.signature);
    expect((await loginVerify(first)).account_id).toBe(alice.accountId);
    await refused(loginVerify(second), 'challenge');

    // Expired: the injected clock moves past the 5 minutes.
    const late = await deviceA.get(await loginOptions());
    t.clock.advance(CHALLENGE_TTL_MS + 1);
    await refused(loginVerify(late), 'challenge');

    // A registration challenge does not sign in.
    const reg = await registerOptions(alice);
    await refused(loginVerify(await deviceA.get({ challenge: reg.challenge, rpId: 'localhost', userVerification: 'required' })), 'challenge');

    // Alice's registration challenge is not Bob's: refused for him, still hers.
    const spare = await openDevice(context, base);
    const forAlice = await spare.create(await registerOptions(alice));
    const before = await count('passkeys');
    await refused(registerVerify(bob, forAlice), 'challenge');
    expect(await count('passkeys')).toBe(before);
    const second2 = await registerVerify(alice, forAlice, 'Spare');
    expect(second2.name).toBe('Spare');
    expect((await api<Passkey[]>(alice.client, 'GET', '/v1/auth/passkeys')).map((p) => p.name)).toEqual(['Work laptop', 'Spare']);
    await api(alice.client, 'DELETE', `/v1/auth/passkeys/${second2.id}`);
    await spare.page.close();

    // The leader's purge drops challenges past their expiry.
    t.clock.advance(CHALLENGE_TTL_MS + 1);
    expect(await t.gw.leader.runAllOnce()).toBe(true);
    expect(await count('passkey_challenges')).toBe(0);
  });

  it('refuses another origin, another RP id, a bad signature and a tampered registration, writing nothing', async () => {
    const other = await startTestGateway(); // its passkey origin is http://localhost:<its port>
    try {
      const elsewhere = await deviceA.get(await api(other.client, 'POST', '/v1/auth/passkey/login/options', {}));
      const e = await refused(loginVerify(elsewhere, other.client), 'origin');
      expect(e.message).toContain(base);
    } finally {
      await other.close();
    }
    const sessions = await count('sessions');
    const row = await storedKey(aliceKey.credential_id);

    await refused(loginVerify(withClientData(await deviceA.get(await loginOptions()), (cd) => (cd.origin = 'https://evil.example'))), 'origin');
    await refused(loginVerify(withClientData(await deviceA.get(await loginOptions()), (cd) => (cd.type = 'webauthn.create'))), 'type');

    const wrongRp = await deviceA.get(await loginOptions());
    const authData = b64(wrongRp.response.authenticatorData);
    createHash('sha256').update('evil.example').digest().copy(authData, 0);
    await refused(loginVerify({ ...wrongRp, response: { ...wrongRp.response, authenticatorData: authData.toString('base64url') } }), 'rp_id');

    const forged = await deviceA.get(await loginOptions());
    const sig = b64(forged.response.signature);
    sig[sig.length - 1]! ^= 0xff;
    await refused(loginVerify({ ...forged, response: { ...forged.response, signature: sig.toString('base64url') } }), 'signature');

    const unknown = await deviceA.get(await loginOptions());
    await refused(loginVerify({ ...unknown, id: 'AAAA', rawId: 'AAAA' }), 'unknown_credential');

    // Registration from another origin: refused, no passkey added.
    const spare = await openDevice(context, base);
    const made = await spare.create(await registerOptions(alice));
    await refused(registerVerify(alice, withClientData(made, (cd) => (cd.origin = 'https://evil.example'))), 'origin');
    await spare.page.close();

    expect(await count('sessions')).toBe(sessions);
    expect(await count('passkeys')).toBe(1);
    expect(await storedKey(aliceKey.credential_id)).toEqual(row);
  });

  it('refuses a signature counter that goes backwards, and takes the next one that moves forward', async () => {
    const row = await storedKey(aliceKey.credential_id);
    expect(row.counter).toBeGreaterThan(0); // this authenticator keeps a counter
    const db = t.gw.database.db;
    await db.updateTable('passkeys').set({ counter: row.counter + 1000 }).where('id', '=', row.id).execute();
    const sessions = await count('sessions');
    const e = await refused(loginVerify(await deviceA.get(await loginOptions())), 'counter');
    expect(e.message).toContain(String(row.counter + 1000));
    expect(await count('sessions')).toBe(sessions);
    expect((await storedKey(aliceKey.credential_id)).counter).toBe(row.counter + 1000);

    await db.updateTable('passkeys').set({ counter: row.counter }).where('id', '=', row.id).execute();
    expect((await loginVerify(await deviceA.get(await loginOptions()))).account_id).toBe(alice.accountId);
    expect((await storedKey(aliceKey.credential_id)).counter).toBe((await deviceA.credentials())[0]!.signCount);
  });

  it(`holds at most ${MAX_PASSKEYS} passkeys per account: two registrations racing at ${MAX_PASSKEYS - 1} make ${MAX_PASSKEYS}, not ${MAX_PASSKEYS + 1}`, async () => {
    const carol = await signIn();
    const device = await openDevice(context, base);
    const db = t.gw.database.db;
    for (let i = 0; i < MAX_PASSKEYS - 2; i++) {
      await insertPasskey(db, {
        id: newId('passkey_'),
        account_id: carol.accountId,
        credential_id: `seeded-${carol.accountId}-${i}`,
        public_key: new Uint8Array([1, 2, 3]),
        counter: 0,
        transports: [],
        device_type: 'multiDevice',
        backed_up: true,
        aaguid: '00000000-0000-0000-0000-000000000000',
        name: `Seeded ${i}`,
        created_at: t.clock.now(),
        last_used_at: null,
      });
    }
    const nineteenth = await registerVerify(carol, await device.create(await registerOptions(carol)));
    expect(nineteenth.name).toBe(`Passkey ${MAX_PASSKEYS - 1}`);

    // Two more devices (an authenticator that holds an excluded credential refuses to make another).
    const [d1, d2] = [await openDevice(context, base), await openDevice(context, base)];
    const [o1, o2] = await Promise.all([registerOptions(carol), registerOptions(carol)]);
    expect(o1.excludeCredentials).toHaveLength(MAX_PASSKEYS - 1);
    await expect(device.create(o1)).rejects.toThrow(/InvalidStateError/);
    const [c1, c2] = [await d1.create(o1), await d2.create(o2)];
    const results = await Promise.allSettled([registerVerify(carol, c1), registerVerify(carol, c2)]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    const e = await expectApiError(Promise.reject(lost.reason), 409, 'conflict');
    expect(e.body?.error).toMatchObject({ reason: 'passkey_limit', limit: MAX_PASSKEYS });
    expect(e.message).toContain(`at most ${MAX_PASSKEYS} passkeys`);
    expect(await api<Passkey[]>(carol.client, 'GET', '/v1/auth/passkeys')).toHaveLength(MAX_PASSKEYS);

    // At the limit, new options are refused too; nothing is written.
    const challenges = await count('passkey_challenges');
    const full = await expectApiError(registerOptions(carol), 409, 'conflict');
    expect(full.body?.error.reason).toBe('passkey_limit');
    expect(await count('passkey_challenges')).toBe(challenges);
    expect(Number((await db.selectFrom('passkeys').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', carol.accountId).executeTakeFirstOrThrow()).n)).toBe(MAX_PASSKEYS);
    for (const d of [device, d1, d2]) await d.page.close();
  });

  it('validates bodies with 400s naming the field', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['/v1/auth/passkey/login/verify', {}, 'credential'],
      ['/v1/auth/passkey/login/verify', { credential: { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: 'AA', authenticatorData: 'AA' } } }, 'credential.response.signature'],
      ['/v1/auth/passkey/login/verify', { credential: { id: 'AA', rawId: 'AA', type: 'password', response: { clientDataJSON: 'AA', authenticatorData: 'AA', signature: 'AA' } } }, 'credential.type'],
      ['/v1/auth/passkey/login/verify', { credential: { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: 'bm90IGpzb24', authenticatorData: 'AA', signature: 'AA' } } }, 'credential.response.clientDataJSON'],
      ['/v1/auth/passkey/login/options', { account: 'x' }, 'account'],
    ];
    for (const [path, body, param] of cases) {
      const e = await expectApiError(api(anon, 'POST', path, body), 400, 'invalid_request');
      expect(e.param, `${path} ${JSON.stringify(body)}`).toBe(param);
    }
    // A registration whose challenge is real: a refused body leaves it unused.
    const opts = await registerOptions(alice);
    const fake = { id: 'AA', rawId: 'AA', type: 'public-key', response: { clientDataJSON: Buffer.from(JSON.stringify({ type: 'webauthn.create', challenge: opts.challenge, origin: base })).toString('base64url'), attestationObject: 'AA' } };
    for (const [name, param] of [['', 'name'], ['y'.repeat(65), 'name']] as const) {
      expect((await expectApiError(registerVerify(alice, fake, name), 400, 'invalid_request')).param).toBe(param);
    }
    expect((await expectApiError(registerVerify(alice, fake), 400, 'invalid_request')).param).toBe('credential.response.attestationObject');
  });

  it('is refused to a session acting for an organization', async () => {
    const org = await api<{ id: string }>(alice.client, 'POST', '/v1/orgs', { name: 'Passkey org' });
    const switched = await api<{ token: string }>(alice.client, 'POST', `/v1/orgs/${org.id}/switch`);
    const asOrg = anon.withCredential({ kind: 'session', token: switched.token });
    await expectApiError(api(asOrg, 'GET', '/v1/auth/passkeys'), 403, 'forbidden');
    await expectApiError(registerOptions({ ...alice, client: asOrg }), 403, 'forbidden');
  });

  it('removing every passkey leaves wallet sign-in working and the sessions passkeys signed in', async () => {
    for (const p of await api<Passkey[]>(alice.client, 'GET', '/v1/auth/passkeys')) {
      expect(await api(alice.client, 'DELETE', `/v1/auth/passkeys/${p.id}`)).toEqual({ id: p.id, object: 'passkey', deleted: true });
    }
    expect(await api<Passkey[]>(alice.client, 'GET', '/v1/auth/passkeys')).toEqual([]);
    await expectApiError(api(alice.client, 'DELETE', `/v1/auth/passkeys/${aliceKey.id}`), 404, 'not_found');

    // The device still holds the credential; the gateway no longer knows it.
    await refused(loginVerify(await deviceA.get(await loginOptions())), 'unknown_credential');
    // A session the passkey signed in stays until it is logged out or expires.
    expect((await api(anon.withCredential({ kind: 'session', token: passkeySession }), 'GET', '/v1/auth/me')).account_id).toBe(alice.accountId);
    const again = await siwe(alice.account);
    expect(again.body).toMatchObject({ account_id: alice.accountId, created_account: false });
  });

  it('without SVC_PASSKEY_RP_ID and SVC_PASSKEY_ORIGIN: every route answers 404 as an unknown route, capabilities say passkey: false, the routes stay documented', async () => {
    const bare = await startTestGateway({ env: { SVC_PASSKEY_RP_ID: '', SVC_PASSKEY_ORIGIN: '' } });
    try {
      expect(await api(bare.client, 'GET', '/v1/auth/capabilities')).toEqual({ siwe: true, passkey: false, session_cookie: true });
      const s = await bare.signIn();
      for (const [method, route] of ROUTES) {
        const path = route.replace(':id', 'passkey_x');
        for (const token of [undefined, s.token]) {
          const res = await bare.client.raw(method, path, { credential: token ? { kind: 'session', token } : null, ...(method === 'GET' || method === 'DELETE' ? {} : { body: {} }) });
          const body = (await res.json()) as { error: Json };
          expect({ route: `${method} ${route}`, status: res.status }).toEqual({ route: `${method} ${route}`, status: 404 });
          expect(body.error).toMatchObject({ type: 'not_found', message: `Route ${method} ${path} not found` });
        }
      }
      const doc = (await (await fetch(`${bare.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
      expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([...new Set(ROUTES.map(([, p]) => p.replace(':id', '{id}')))]));
    } finally {
      await bare.close();
    }
  });
});
