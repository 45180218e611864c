import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { expectApiError } from './support/expect-error.ts';
import { fundedKey, startTestGateway, type TestGateway } from './support/gateway.ts';

/**
 * A date-time that names no real instant (a day the month lacks, an hour past 23) is refused with a 400 naming
 * its field wherever the API takes one, rather than stored as the date JavaScript would roll it into
 * (2030-02-30 as March 2). Each value below would roll into a date the route accepts.
 */
let t: TestGateway;
let s: Awaited<ReturnType<typeof fundedKey>>;
let key: SvcClient;
beforeAll(async () => {
  t = await startTestGateway();
  t.clock.set(Date.UTC(2027, 2, 1, 12)); // 2027-03-01T12:00Z: 2027-02-29T12:00Z would roll into this very instant
  s = await fundedKey(t, 1_000_000);
  const minted = await s.client.createKey({ scopes: ['keys:delegate', 'proofs', 'inference'] });
  key = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: minted.key } });
});
afterAll(async () => t?.close());

const refusedAt = async (p: Promise<unknown>, param: string) => {
  const e = await expectApiError(p, 400, 'invalid_request');
  expect(e.param).toBe(param);
  expect(e.message).toMatch(/not a calendar date|not a time of day/);
};

describe('impossible dates', () => {
  it('keys and delegated keys: expires_at', async () => {
    for (const v of ['2030-02-30T00:00:00Z', '2031-04-31T12:00:00Z', '2030-01-01T24:30:00Z']) {
      await refusedAt(s.client.createKey({ expires_at: v }), 'expires_at');
      await refusedAt(key.delegateKey({ expires_at: v }), 'expires_at');
    }
    expect((await s.client.createKey({ expires_at: '2028-02-29T00:00:00Z' })).expires_at).toBe('2028-02-29T00:00:00.000Z');
  });

  it('usage events (since, until) and the signed statement (from, to)', async () => {
    for (const param of ['since', 'until']) await refusedAt(s.client.request('GET', '/v1/usage/events', { query: { [param]: '2027-02-29T12:00:00Z' } }), param);
    await refusedAt(s.client.request('POST', '/v1/usage/statement', { body: { from: '2027-02-29T00:00:00Z', to: '2027-03-01T00:00:00Z' } }), 'from');
    await refusedAt(s.client.request('POST', '/v1/usage/statement', { body: { from: '2027-02-01T00:00:00Z', to: '2027-02-31T00:00:00Z' } }), 'to');
  });

  it('mandates: expires_at', async () => {
    const parent = await s.client.createKey({ name: 'parent' });
    await refusedAt(s.client.request('POST', '/v1/mandates', { body: { parent_key_id: parent.id, purpose: 'travel', spend_cap_micro_usd: 1000, expires_at: '2030-02-30T00:00:00Z' } }), 'expires_at');
    expect(await s.client.request<{ mandates: unknown[] }>('GET', '/v1/mandates')).toMatchObject({ mandates: [] });
  });

  it('the SLA report (from, to), NAV prices (price_as_of) and benchmark retention (retain_until)', async () => {
    await refusedAt(s.client.request('POST', '/v1/reports/sla', { body: { from: '2027-02-29T00:00:00Z' } }), 'from');
    const holdings = [{ label: 'a', quantity: '1', price: '2', price_as_of: '2027-02-29T00:00:00Z' }];
    await refusedAt(key.request('POST', '/v1/nav/calculate', { body: { asset_id: 'fund-dates', currency: 'USD', holdings, shares_outstanding: '10' } }), 'holdings[0].price_as_of');
    const portfolio = { cohort: 'multi-asset-usd', holdings: [{ asset_class: 'equity', value: '100' }], retain_until: '2027-04-31T00:00:00Z' };
    await refusedAt(key.request('POST', '/v1/benchmarks/portfolio', { body: portfolio }), 'retain_until');
  });

  it('vault figures (as_of) and legacy plans (deadline)', async () => {
    await refusedAt(s.client.request('POST', '/v1/vault/assets/vasset_none/nav', { body: { kind: 'nav', value_micro_usd: 1, as_of: '2027-02-29T00:00:00Z' } }), 'as_of');
    const heir = privateKeyToAccount(generatePrivateKey());
    const plan = { name: 'Plan', note: 'hello', checkin_interval_seconds: 30 * 86_400, beneficiaries: [{ wallet: heir.address }], deadline: '2027-04-31T00:00:00Z' };
    await refusedAt(s.client.request('POST', '/v1/legacy/plans', { body: plan }), 'deadline');
    expect(await s.client.request<{ plans: unknown[] }>('GET', '/v1/legacy/plans')).toMatchObject({ plans: [] });
  });

  it('sign-in: an EIP-4361 Issued At that names no day', async () => {
    const wallet = privateKeyToAccount(generatePrivateKey());
    const { nonce } = await t.client.nonce();
    const message = t.client.siweMessage(wallet.address, nonce, { issuedAt: t.clock.now() }).replace(/^Issued At: .*$/m, 'Issued At: 2027-02-29T12:00:00.000Z');
    const e = await expectApiError(t.client.verify(message, await wallet.signMessage({ message })), 400, 'invalid_request');
    expect(e.param).toBe('message');
    expect(e.message).toContain('issuedAt: not a calendar date: February 2027 has days 01 to 28');
  });
});
