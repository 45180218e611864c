import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createSiweMessage } from 'viem/siwe';
import { SvcClient } from '@svc/shared/client';
import { expectApiError } from './support/expect-error.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway();
});
afterAll(async () => t?.close());

async function countRows(table: 'accounts' | 'sessions' | 'wallets'): Promise<number> {
  const r = await t.gw.database.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}

describe('SIWE sign-in', () => {
  it('signs in a viem wallet, creating the account once, and the token and cookie both work', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const first = await t.signIn(account);
    const me = await first.client.me();
    expect(me).toEqual({ account_id: first.accountId, wallet_address: account.address });

    const again = await t.signIn(account);
    expect(again.accountId).toBe(first.accountId);

    // The HttpOnly cookie set by verify is a session credential too.
    const { nonce } = await t.client.nonce();
    const message = t.client.siweMessage(account.address, nonce, { issuedAt: t.clock.now() });
    const res = await fetch(`${t.url}/v1/auth/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message, signature: await account.signMessage({ message }) }),
    });
    const setCookie = res.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^svc_session=sess_[^;]+; Path=\/; HttpOnly; SameSite=Lax/);
    const viaCookie = await fetch(`${t.url}/v1/auth/me`, { headers: { cookie: setCookie.split(';')[0]! } });
    expect(viaCookie.status).toBe(200);
    expect(((await viaCookie.json()) as { account_id: string }).account_id).toBe(first.accountId);
  });

  it('refuses a replayed nonce and writes nothing', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const { nonce } = await t.client.nonce();
    const message = t.client.siweMessage(account.address, nonce, { issuedAt: t.clock.now() });
    const signature = await account.signMessage({ message });
    await t.client.verify(message, signature);
    const sessions = await countRows('sessions');
    const e = await expectApiError(t.client.verify(message, signature), 401, 'invalid_siwe');
    expect(e.message).toMatch(/nonce/);
    expect(await countRows('sessions')).toBe(sessions);
  });

  it('refuses an expired nonce (5-minute TTL) and an expired message', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const { nonce } = await t.client.nonce();
    const issued = t.clock.now();
    const message = t.client.siweMessage(account.address, nonce, { issuedAt: issued });
    const signature = await account.signMessage({ message });
    t.clock.advance(5 * 60_000 + 1);
    await expectApiError(t.client.verify(message, signature), 401, 'invalid_siwe');

    const n2 = await t.client.nonce();
    const expired = createSiweMessage({
      domain: new URL(t.url).host,
      uri: t.url,
      address: account.address,
      chainId: 1,
      nonce: n2.nonce,
      version: '1',
      issuedAt: new Date(t.clock.now().getTime() - 60_000),
      expirationTime: new Date(t.clock.now().getTime() - 1000),
    });
    const e = await expectApiError(t.client.verify(expired, await account.signMessage({ message: expired })), 401, 'invalid_siwe');
    expect(e.message).toMatch(/expired/);
  });

  it('purges expired nonces on the leader\'s loop; a used nonce stays refused once its row is gone', async () => {
    const db = t.gw.database.db;
    const account = privateKeyToAccount(generatePrivateKey());
    const used = await t.client.nonce();
    const message = t.client.siweMessage(account.address, used.nonce, { issuedAt: t.clock.now() });
    const signature = await account.signMessage({ message });
    await t.client.verify(message, signature);
    const waiting = await t.client.nonce();
    const rows = async (n: string) => (await db.selectFrom('siwe_nonces').select('nonce').where('nonce', '=', n).execute()).length;
    await t.gw.leader.runAllOnce(); // nothing has expired yet
    expect([await rows(used.nonce), await rows(waiting.nonce)]).toEqual([1, 1]);
    t.clock.advance(5 * 60_000);
    await t.gw.leader.runAllOnce();
    expect([await rows(used.nonce), await rows(waiting.nonce)]).toEqual([0, 0]);
    // Gone is refused as used or expired was: nothing deleted can be replayed.
    await expectApiError(t.client.verify(message, signature), 401, 'invalid_siwe');
  });

  it('refuses a message for another domain, another origin, another chain, or not yet valid', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const host = new URL(t.url).host;
    const cases: Array<[Partial<Parameters<typeof createSiweMessage>[0]>, RegExp]> = [
      [{ domain: 'evil.example' }, /domain/],
      [{ uri: 'https://evil.example/login' }, /URI origin/],
      [{ chainId: 5 }, /Chain ID/],
      [{ notBefore: new Date(t.clock.now().getTime() + 3600_000) }, /not yet valid/],
      [{ issuedAt: new Date(t.clock.now().getTime() + 3600_000) }, /future/],
    ];
    const before = await countRows('accounts');
    for (const [override, pattern] of cases) {
      const { nonce } = await t.client.nonce();
      const message = createSiweMessage({ domain: host, uri: t.url, address: account.address, chainId: 1, nonce, version: '1', issuedAt: t.clock.now(), ...override });
      const e = await expectApiError(t.client.verify(message, await account.signMessage({ message })), 401, 'invalid_siwe');
      expect(e.message).toMatch(pattern);
    }
    expect(await countRows('accounts')).toBe(before);
  });

  it('refuses a signature by another wallet, a malformed signature and a malformed message', async () => {
    const claimed = privateKeyToAccount(generatePrivateKey());
    const other = privateKeyToAccount(generatePrivateKey());
    const { nonce } = await t.client.nonce();
    const message = t.client.siweMessage(claimed.address, nonce, { issuedAt: t.clock.now() });
    const e = await expectApiError(t.client.verify(message, await other.signMessage({ message })), 401, 'invalid_siwe');
    expect(e.message).toMatch(/not made by the message address/);
    const bad = await expectApiError(t.client.verify(message, '0x1234'), 400, 'invalid_request');
    expect(bad.param).toBe('signature');
    const junk = await expectApiError(t.client.verify('hello there', await claimed.signMessage({ message: 'hello there' })), 400, 'invalid_request');
    expect(junk.param).toBe('message');
    // The nonce was never consumed: the right signature still signs in.
    await t.client.verify(message, await claimed.signMessage({ message }));
  });

  it('answers malformed JSON and wrong types with a 400 naming the problem', async () => {
    const r1 = await t.client.raw('POST', '/v1/auth/verify', { body: '{"message": ', headers: { 'content-type': 'application/json' } });
    expect(r1.status).toBe(400);
    expect(((await r1.json()) as { error: { type: string } }).error.type).toBe('invalid_json');
    await expectApiError(t.client.request('POST', '/v1/auth/verify', { body: { message: 42, signature: '0x' } }), 400, 'invalid_request').then((e) =>
      expect(e.param).toBe('message'),
    );
  });

  it('reports capabilities', async () => {
    // Test gateways configure passkeys; test/passkeys.test.ts checks `passkey: false` without them.
    expect(await t.client.request('GET', '/v1/auth/capabilities')).toEqual({ siwe: true, passkey: true, session_cookie: true });
  });
});

describe('sessions', () => {
  it('lists live sessions, logs out one, then all', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const a = await t.signIn(account);
    const b = await t.signIn(account);
    const list = await a.client.sessions();
    expect(list).toHaveLength(2);
    expect(list.filter((s) => s.current)).toHaveLength(1);
    expect(JSON.stringify(list)).not.toContain(a.token);

    expect(await a.client.logout()).toEqual({ revoked: 1 });
    await expectApiError(a.client.me(), 401, 'invalid_credential');
    expect((await b.client.me()).account_id).toBe(b.accountId);

    const c = await t.signIn(account);
    expect(await c.client.logoutAll()).toEqual({ revoked: 2 });
    await expectApiError(b.client.me(), 401, 'invalid_credential');
    await expectApiError(c.client.me(), 401, 'invalid_credential');
  });

  it('expires sessions after their lifetime', async () => {
    const s = await t.signIn();
    t.clock.advance(t.gw.config.sessionTtlSeconds * 1000 + 1);
    const e = await expectApiError(s.client.me(), 401, 'invalid_credential');
    expect(e.message).toMatch(/expired/);
  });
});

describe('wallets', () => {
  it('links a second wallet with its own SIWE proof, refuses a taken one, and never unlinks the last', async () => {
    const owner = await t.signIn();
    const second = privateKeyToAccount(generatePrivateKey());
    const linked = await owner.client.linkWallet(second, { issuedAt: t.clock.now() });
    expect(linked.address).toBe(second.address);
    // Signing in with the linked wallet reaches the same account.
    expect((await t.signIn(second)).accountId).toBe(owner.accountId);

    const stranger = await t.signIn();
    await expectApiError(stranger.client.linkWallet(second, { issuedAt: t.clock.now() }), 409, 'wallet_taken');

    expect((await owner.client.wallets()).map((w) => w.address).sort()).toEqual([owner.account.address, second.address].sort());
    await owner.client.unlinkWallet(owner.account.address);
    await expectApiError(owner.client.unlinkWallet(second.address), 409, 'last_wallet');
    await expectApiError(owner.client.unlinkWallet(stranger.account.address), 404, 'not_found');
    await expectApiError(owner.client.unlinkWallet('not-an-address'), 400, 'invalid_request');
    expect(await owner.client.wallets()).toHaveLength(1);
  });

  it('a link proof must be signed by the wallet being linked', async () => {
    const owner = await t.signIn();
    const target = privateKeyToAccount(generatePrivateKey());
    const impostor = privateKeyToAccount(generatePrivateKey());
    const before = await countRows('wallets');
    await expectApiError(owner.client.linkWallet({ address: target.address, signMessage: (m) => impostor.signMessage(m) }, { issuedAt: t.clock.now() }), 401, 'invalid_siwe');
    expect(await countRows('wallets')).toBe(before);
  });
});

describe('credential kinds', () => {
  it('refuses an API key where a session is needed, and an unknown session', async () => {
    const s = await t.signIn();
    const key = await s.client.createKey();
    const asKey = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
    await expectApiError(asKey.me(), 401, 'wrong_credential_kind');
    const unknown = new SvcClient({ baseUrl: t.url, credential: { kind: 'session', token: 'sess_nope' } });
    await expectApiError(unknown.me(), 401, 'invalid_credential');
  });
});
