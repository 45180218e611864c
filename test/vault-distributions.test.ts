import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { ASSET, chainLength, expectChainRecomputes, holders, publicChain, register, transfer, type Party } from './support/vault.ts';

/**
 * Vault distributions: a pro-rata payout recorded over current positions with three holders, each share
 * rounded down and the remainder stated; no principal moves; the issuer reads every allocation, a holder
 * their own; refusals leave the chain as it was.
 */
interface Distribution {
  id: string;
  seen_as: 'issuer' | 'holder';
  amount_micro_usd: number;
  basis_micro_usd: number | null;
  allocated_micro_usd: number | null;
  remainder_micro_usd: number | null;
  holder_count: number | null;
  rounding: string;
  memo: string | null;
  allocations: Array<{ account_id: string; position_micro_usd: number; amount_micro_usd: number }>;
}

let t: TestGateway;
let a: Party;
let b: Party;
let c: Party;
let stranger: Party;
beforeAll(async () => {
  t = await startTestGateway();
  [a, b, c, stranger] = [await t.signIn(), await t.signIn(), await t.signIn(), await t.signIn()];
}, 120_000);
afterAll(async () => t?.close());

const distribute = (p: Party, id: string, body: Record<string, unknown>) => p.client.request<Distribution>('POST', `/v1/vault/assets/${id}/distribute`, { body });

describe('vault distributions', () => {
  it('allocates pro rata, rounding each share down and stating the remainder; positions are untouched', async () => {
    const asset = await register(a.client, { ...ASSET, issued_micro_usd: 1_000_001 });
    await transfer(a.client, { asset_id: asset.id, to_wallet: b.account.address, amount_micro_usd: 333_333 });
    await transfer(a.client, { asset_id: asset.id, to_wallet: c.account.address, amount_micro_usd: 333_334 });
    const before = await holders(a.client, asset.id);
    t.clock.advance(60_000);
    const d = await distribute(a, asset.id, { amount_micro_usd: 1_000, memo: 'Q3 rent' });
    // Positions: a 333,334, b 333,333, c 333,334 of a basis of 1,000,001.
    const expected = (pos: number) => Number((1_000n * BigInt(pos)) / 1_000_001n);
    expect(d).toMatchObject({ seen_as: 'issuer', amount_micro_usd: 1_000, basis_micro_usd: 1_000_001, holder_count: 3, memo: 'Q3 rent' });
    for (const p of [a, b, c]) {
      const al = d.allocations.find((x) => x.account_id === p.accountId)!;
      expect(al.amount_micro_usd).toBe(expected(al.position_micro_usd));
    }
    const allocated = d.allocations.reduce((s, x) => s + x.amount_micro_usd, 0);
    expect(allocated).toBe(999); // 333 + 333 + 333
    expect(d.allocated_micro_usd).toBe(allocated);
    expect(d.remainder_micro_usd).toBe(1);
    expect(d.rounding).toContain('floor(amount × position ÷ basis)');
    expect(await holders(a.client, asset.id)).toEqual(before); // no principal moved

    // A holder reads the amount, the rule and their own allocation only.
    const seen = await b.client.request<{ distributions: Distribution[] }>('GET', '/v1/vault/distributions');
    expect(seen.distributions).toHaveLength(1);
    expect(seen.distributions[0]).toMatchObject({ id: d.id, seen_as: 'holder', amount_micro_usd: 1_000, basis_micro_usd: null, remainder_micro_usd: null, holder_count: null });
    expect(seen.distributions[0]!.allocations).toEqual([{ account_id: b.accountId, position_micro_usd: 333_333, amount_micro_usd: 333 }]);
    const issuerList = await a.client.request<{ distributions: Distribution[] }>('GET', `/v1/vault/distributions?asset_id=${asset.id}`);
    expect(issuerList.distributions[0]!.allocations).toHaveLength(3);
    expect((await stranger.client.request<{ distributions: Distribution[] }>('GET', '/v1/vault/distributions')).distributions).toEqual([]);
    // The portfolio shows it as activity.
    const p = await c.client.request<{ recent_activity: Array<{ kind: string; id: string; amount_micro_usd: number }> }>('GET', '/v1/vault/portfolio');
    expect(p.recent_activity[0]).toMatchObject({ kind: 'distribution', id: d.id, amount_micro_usd: 333 });
    const chain = await publicChain(t, asset.id);
    expect(chain.events.at(-1)!.type).toBe('distribution_recorded');
    expectChainRecomputes(chain);
  });

  it('refuses a holder (403), a stranger (404), a bad amount (400) and an asset with no positions (409), chain unchanged', async () => {
    const asset = await register(a.client, { ...ASSET, issued_micro_usd: 10_000 });
    await transfer(a.client, { asset_id: asset.id, to_wallet: b.account.address, amount_micro_usd: 4_000 });
    const length = await chainLength(t, asset.id);
    await expectApiError(distribute(b, asset.id, { amount_micro_usd: 10 }), 403, 'forbidden');
    await expectApiError(distribute(stranger, asset.id, { amount_micro_usd: 10 }), 404, 'not_found');
    for (const body of [{ amount_micro_usd: 0 }, { amount_micro_usd: -5 }, { amount_micro_usd: 'ten' }, {}]) {
      expect((await expectApiError(distribute(a, asset.id, body), 400, 'invalid_request')).param).toBe('amount_micro_usd');
    }
    expect(await chainLength(t, asset.id)).toBe(length);

    // Everything sent to wallets without an account: nothing holds a position to allocate over.
    const empty = await register(a.client, { ...ASSET, issued_micro_usd: 500 });
    await transfer(a.client, { asset_id: empty.id, to_wallet: privateKeyToAccount(generatePrivateKey()).address, amount_micro_usd: 500 });
    const l2 = await chainLength(t, empty.id);
    expect((await expectApiError(distribute(a, empty.id, { amount_micro_usd: 10 }), 409, 'conflict')).body!.error).toMatchObject({ reason: 'no_positions' });
    expect(await chainLength(t, empty.id)).toBe(l2);
  });
});
