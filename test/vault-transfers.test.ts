import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { chainLength, expectChainRecomputes, holders, publicChain, register, transfer, type Asset, type Holders, type Party, type Transfer } from './support/vault.ts';

/**
 * Vault positions end to end with three accounts and account-less wallets: transfers (value-conserving,
 * refused without a trace when they should be), concurrent transfers that would overdraw one position
 * (exactly the allowed ones pass; on the Postgres server they race for real), a claim settled by an
 * account created later for its wallet, a claim cancelled, and a closed asset refusing transfers.
 */
let t: Awaited<ReturnType<typeof startTestGateway>>;
let a: Party; // issuer
let b: Party;
let c: Party;
beforeAll(async () => {
  t = await startTestGateway();
  [a, b, c] = [await t.signIn(), await t.signIn(), await t.signIn()];
}, 120_000);
afterAll(async () => t?.close());

/**
 * On the Postgres server, runs `race` while the test holds the asset row's lock, releasing it once `n`
 * transactions wait for it: the transfers then really contend. The embedded database runs them one by one.
 */
async function racing<T>(assetId: string, n: number, race: () => Promise<T>): Promise<T> {
  if (TEST_DB_KIND !== 'postgres') return race();
  const holder = new pg.Client({ connectionString: t.databaseUrl });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query('select id from vault_assets where id = $1 for update', [assetId]);
    const running = race();
    await expect
      .poll(async () => {
        await holder.query('select pg_stat_clear_snapshot()');
        return Number((await holder.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0].n);
      }, { timeout: 20_000 })
      .toBe(n);
    await holder.query('rollback');
    return await running;
  } finally {
    await holder.end();
  }
}

/** Each test's own asset, registered by a (the whole issue); with `toB`, that much transferred to b first. */
async function freshAsset(toB = 0): Promise<Asset> {
  const asset = await register(a.client);
  if (toB) await transfer(a.client, { asset_id: asset.id, to_wallet: b.account.address, amount_micro_usd: toB });
  return asset;
}
const transfers = async (assetId: string) => (await a.client.request<{ transfers: Transfer[] }>('GET', `/v1/vault/transfers?asset_id=${assetId}`)).transfers;

const conserved = (h: Holders) => expect(h.total_micro_usd + h.pending_claims_micro_usd).toBe(h.issued_micro_usd);
const position = (h: Holders, accountId: string) => h.holders.find((x) => x.account_id === accountId)?.amount_micro_usd ?? 0;

describe('vault transfers', () => {
  it("moves value from the caller's position to another account's wallet; the sum never changes", async () => {
    const asset = await freshAsset();
    const tr = await transfer(a.client, { asset_id: asset.id, to_wallet: b.account.address, amount_micro_usd: 300_000_000, memo: 'first close' });
    expect(tr).toMatchObject({ object: 'vault_transfer', status: 'settled', to_account_id: b.accountId, amount_micro_usd: 300_000_000, memo: 'first close', claim: null, asset_name: asset.name });
    const h = await holders(a.client, asset.id);
    expect(position(h, a.accountId)).toBe(700_000_000);
    expect(position(h, b.accountId)).toBe(300_000_000);
    expect(h.holders.find((x) => x.account_id === b.accountId)!.wallet).toBe(b.account.address);
    conserved(h);
    const p = await b.client.request<{ holdings: Array<{ asset_id: string; amount_micro_usd: number }>; recent_activity: Array<{ kind: string; id: string }> }>('GET', '/v1/vault/portfolio');
    expect(p.holdings).toEqual([{ asset_id: asset.id, name: asset.name, state: 'open', amount_micro_usd: 300_000_000 }]);
    expect(p.recent_activity[0]).toMatchObject({ kind: 'transfer_received', id: tr.id });
    // A holder now sees the asset, without the issued amount.
    const seen = await b.client.request<Asset>('GET', `/v1/vault/assets/${asset.id}`);
    expect(seen).toMatchObject({ roles: ['holder'], issued_micro_usd: null, name: asset.name });
  });

  it('refuses bad transfers with a clear 4xx and leaves the chain, the cap table and the transfers unchanged', async () => {
    const asset = await freshAsset(300_000_000);
    const before = { length: await chainLength(t, asset.id), table: await holders(a.client, asset.id), transfers: await transfers(asset.id) };
    const base = { asset_id: asset.id, to_wallet: c.account.address, amount_micro_usd: 1 };
    let e = await expectApiError(transfer(b.client, { ...base, amount_micro_usd: 300_000_001 }), 409, 'conflict');
    expect(e.body!.error).toMatchObject({ param: 'amount_micro_usd', reason: 'insufficient_position', available_micro_usd: 300_000_000 });
    e = await expectApiError(transfer(b.client, { ...base, to_wallet: b.account.address }), 400, 'invalid_request');
    expect(e.param).toBe('to_wallet');
    e = await expectApiError(transfer(b.client, { ...base, to_wallet: b.account.address.toLowerCase() }), 400, 'invalid_request');
    expect(e.param).toBe('to_wallet');
    for (const [body, field] of [[{ ...base, amount_micro_usd: 0 }, 'amount_micro_usd'], [{ ...base, to_wallet: '0x1234' }, 'to_wallet'], [{ ...base, asset_id: undefined }, 'asset_id']] as const) {
      expect((await expectApiError(transfer(b.client, body), 400, 'invalid_request')).param).toBe(field);
    }
    await expectApiError(transfer(c.client, base), 404, 'not_found'); // no part in the asset
    await expectApiError(transfer(b.client, { ...base, asset_id: 'vast_unknown' }), 404, 'not_found');
    // Issuer-only routes: a holder learns 403, anyone else 404.
    expect((await expectApiError(holders(b.client, asset.id), 403, 'forbidden')).body!.error).toMatchObject({ reason: 'issuer_only' });
    await expectApiError(holders(c.client, asset.id), 404, 'not_found');
    await expectApiError(b.client.request('POST', `/v1/vault/assets/${asset.id}/close`), 403, 'forbidden');
    expect({ length: await chainLength(t, asset.id), table: await holders(a.client, asset.id), transfers: await transfers(asset.id) }).toEqual(before);
  });

  it('lets exactly the allowed ones of concurrent transfers from one position pass; the total is conserved', async () => {
    const asset = await freshAsset(300_000_000);
    const length = await chainLength(t, asset.id);
    // b holds 300,000,000: five transfers of 100,000,000 at once, three fit.
    const results = await racing(asset.id, 5, () => Promise.allSettled(Array.from({ length: 5 }, () => transfer(b.client, { asset_id: asset.id, to_wallet: c.account.address, amount_micro_usd: 100_000_000 }))));
    const passed = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(passed).toHaveLength(3);
    for (const r of refused) expect(r.reason).toMatchObject({ status: 409, type: 'conflict' });
    const h = await holders(a.client, asset.id);
    expect(position(h, b.accountId)).toBe(0);
    expect(position(h, c.accountId)).toBe(300_000_000);
    conserved(h);
    expect(await chainLength(t, asset.id)).toBe(length + 3);
    console.log(`concurrent transfers on ${TEST_DB_KIND}: ${passed.length} passed, ${refused.length} refused`);
    // b holds nothing now: no longer a party (404), and not in the cap table.
    expect(h.holders.map((x) => x.account_id)).not.toContain(b.accountId);
    await expectApiError(b.client.request('GET', `/v1/vault/assets/${asset.id}`), 404, 'not_found');
  });

  it('sends to a wallet with no account as a claim that an account created later for that wallet settles', async () => {
    const asset = await freshAsset();
    const w = privateKeyToAccount(generatePrivateKey());
    const tr = await transfer(a.client, { asset_id: asset.id, to_wallet: w.address, amount_micro_usd: 50_000_000 });
    expect(tr).toMatchObject({ status: 'claim_pending', to_account_id: null, claim: { state: 'pending' } });
    const token = tr.claim!.token!;
    expect(token).toMatch(/^vclaim-svc_/);
    let h = await holders(a.client, asset.id);
    expect(h.pending_claims_micro_usd).toBe(50_000_000);
    conserved(h);
    // The public link: asset name and wallet, never the amount.
    const res = await fetch(tr.claim!.claim_url!);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(JSON.parse(text)).toMatchObject({ object: 'vault_claim_link', asset_name: asset.name, wallet: w.address, state: 'pending' });
    expect(text).not.toMatch(/50000000|amount/);
    // The sender sees it with the amount.
    const sent = await a.client.request<{ claims: Array<{ id: string; amount_micro_usd: number; state: string }> }>('GET', '/v1/vault/claims');
    expect(sent.claims.find((x) => x.id === tr.claim!.id)).toMatchObject({ amount_micro_usd: 50_000_000, state: 'pending' });
    // The wrong wallet's session: 403, nothing written.
    const before = { length: await chainLength(t, asset.id), table: await holders(a.client, asset.id) };
    expect((await expectApiError(c.client.request('POST', `/v1/vault/claim/${token}`), 403, 'forbidden')).body!.error).toMatchObject({ param: 'token', reason: 'wrong_wallet' });
    expect({ length: await chainLength(t, asset.id), table: await holders(a.client, asset.id) }).toEqual(before);
    // The wallet signs in later (a new account) and settles.
    const later = await t.signIn(w);
    const settled = await later.client.request<{ state: string; position_micro_usd: number; settled_account_id: string }>('POST', `/v1/vault/claim/${token}`);
    expect(settled).toMatchObject({ state: 'settled', position_micro_usd: 50_000_000, settled_account_id: later.accountId });
    expect(await later.client.request('POST', `/v1/vault/claim/${token}`)).toMatchObject({ state: 'settled' }); // again: the same answer
    h = await holders(a.client, asset.id);
    expect(position(h, later.accountId)).toBe(50_000_000);
    expect(h.pending_claims_micro_usd).toBe(0);
    conserved(h);
    expect((await (await fetch(tr.claim!.claim_url!)).json()) as object).toMatchObject({ state: 'settled' });
    await expectApiError(a.client.request('POST', `/v1/vault/claims/${tr.claim!.id}/cancel`), 409, 'conflict');
    const mine = await later.client.request<{ transfers: Transfer[] }>('GET', '/v1/vault/transfers');
    expect(mine.transfers.map((x) => [x.id, x.status, x.to_account_id])).toEqual([[tr.id, 'claim_settled', later.accountId]]);
    const chain = await publicChain(t, asset.id);
    expect(chain.events.map((x) => x.type)).toEqual(['asset_registered', 'transfer', 'claim_settled']);
    expectChainRecomputes(chain);
  });

  it('cancels a claim: the sender is refunded, the link and the settle answer 404 as for an unknown token', async () => {
    const asset = await freshAsset();
    const w = privateKeyToAccount(generatePrivateKey());
    const before = position(await holders(a.client, asset.id), a.accountId);
    const tr = await transfer(a.client, { asset_id: asset.id, to_wallet: w.address, amount_micro_usd: 20_000_000 });
    expect(position(await holders(a.client, asset.id), a.accountId)).toBe(before - 20_000_000);
    await expectApiError(c.client.request('POST', `/v1/vault/claims/${tr.claim!.id}/cancel`), 404, 'not_found'); // not the sender
    const cancelled = await a.client.request<{ state: string }>('POST', `/v1/vault/claims/${tr.claim!.id}/cancel`);
    expect(cancelled).toMatchObject({ state: 'cancelled', amount_micro_usd: 20_000_000 });
    expect(await a.client.request('POST', `/v1/vault/claims/${tr.claim!.id}/cancel`)).toMatchObject({ state: 'cancelled' });
    const h = await holders(a.client, asset.id);
    expect(position(h, a.accountId)).toBe(before);
    conserved(h);
    const unknown = await fetch(`${t.url}/v1/vault/claims/vclaim-svc_unknown`);
    const gone = await fetch(tr.claim!.claim_url!);
    expect([gone.status, await gone.json()]).toEqual([unknown.status, await unknown.json().then((b: any) => ({ error: { ...b.error, request_id: expect.any(String) } }))]);
    const later = await t.signIn(w);
    await expectApiError(later.client.request('POST', `/v1/vault/claim/${tr.claim!.token}`), 404, 'not_found');
    const chain = await publicChain(t, asset.id);
    expect(chain.events.map((x) => x.type)).toEqual(['asset_registered', 'transfer', 'claim_cancelled']);
    expectChainRecomputes(chain);
  });

  it('refuses transfers on a closed asset, chain and cap table unchanged; the chain recomputes', async () => {
    const asset = await freshAsset(1_000_000);
    await a.client.request('POST', `/v1/vault/assets/${asset.id}/close`);
    const before = { length: await chainLength(t, asset.id), table: await holders(a.client, asset.id) };
    const e = await expectApiError(transfer(b.client, { asset_id: asset.id, to_wallet: a.account.address, amount_micro_usd: 1 }), 409, 'conflict');
    expect(e.body!.error).toMatchObject({ reason: 'asset_closed' });
    expect({ length: await chainLength(t, asset.id), table: await holders(a.client, asset.id) }).toEqual(before);
    const chain = await publicChain(t, asset.id);
    expectChainRecomputes(chain);
    expect(chain.events.map((x) => x.type)).toEqual(['asset_registered', 'transfer', 'asset_closed']);
    expect(await transfers(asset.id)).toHaveLength(1);
  });
});
