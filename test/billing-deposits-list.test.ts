import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { newId } from '@svc/shared';
import type { SvcClient } from '@svc/shared/client';
import { LIST_CAP, REFRESH_PAGE } from '../control-plane/src/modules/billing/deposits.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';
import { depositPayer, submitDepositOk, type Deposit } from './support/deposits.ts';

/**
 * The deposit list (newest first, at most 100) and pending deposits with their refresh, which re-checks
 * every pending deposit however many there are. Real anvil chain and token, as in billing-deposits.test.ts;
 * the over-100 cases insert rows straight into billing_deposits. Required confirmations: 3.
 */
const CONFIRMATIONS = 3;
let chain: TestChain;
let usdt: TestToken;
let t: TestGateway;
let treasury: Address;

beforeAll(async () => {
  chain = await startChain();
  usdt = await deployToken(chain);
  treasury = (await chain.newWallet()).address;
  t = await startTestGateway({
    env: {
      SVC_TREASURY_ADDRESS: treasury,
      SVC_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: CONFIRMATIONS }]),
    },
  });
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

const payer = (usdtUnits = 100_000_000n) => depositPayer(chain, usdt, t, usdtUnits);
const submitOk = (c: SvcClient, tx: string, status: number) => submitDepositOk(c, tx, status);

async function written(accountId: string) {
  const db = t.gw.database.db;
  const deposits = await db.selectFrom('billing_deposits').selectAll().where('account_id', '=', accountId).execute();
  const ledger = await db.selectFrom('ledger_entries').selectAll().where('account_id', '=', accountId).execute();
  const pos = await db.selectFrom('credit_accounts').select('balance_micro_usd').where('account_id', '=', accountId).executeTakeFirst();
  return { deposits, ledger, balance: pos?.balance_micro_usd ?? 0 };
}

/** Inserts `n` deposit rows for made-up transactions (none exists on the chain), one second apart, the last a second before `at`. */
async function insertRows(accountId: string, from: string, n: number, status: 'pending' | 'credited', at: Date) {
  const rows = Array.from({ length: n }, (_, i) => {
    const created = new Date(at.getTime() - (n - i) * 1000);
    return {
      id: newId('dep_', 20),
      account_id: accountId,
      chain: 'anvil',
      chain_id: chain.chainId,
      tx_hash: `0x${randomBytes(32).toString('hex')}`,
      log_index: 0,
      from_address: from.toLowerCase(),
      to_address: treasury.toLowerCase(),
      token: usdt.address.toLowerCase(),
      amount: '10000',
      decimals: 6,
      amount_micro_usd: 10_000,
      block_number: 1,
      confirmations: 1,
      required_confirmations: CONFIRMATIONS,
      status,
      reason: null,
      created_at: created,
      updated_at: created,
      credited_at: status === 'credited' ? created : null,
    };
  });
  await t.gw.database.db.insertInto('billing_deposits').values(rows).execute();
  return rows;
}

describe('pending deposits and refresh', () => {
  it('records too few confirmations as pending (202, nothing credited); a refresh after more blocks credits it once', async () => {
    const p = await payer();
    const tx = await usdt.transfer(p.wallet, treasury, 3_000_000n);
    const pending = await submitOk(p.client, tx, 202);
    expect(pending).toMatchObject({ status: 'pending', confirmations: 1, required_confirmations: CONFIRMATIONS, amount_micro_usd: 3_000_000, credited_at: null });
    expect((await submitOk(p.client, tx, 202)).id).toBe(pending.id);
    let w = await written(p.accountId);
    expect(w.deposits).toHaveLength(1);
    expect(w.ledger).toHaveLength(0);
    expect(w.balance).toBe(0);

    await chain.mine(1);
    const stillPending = await p.client.request<Deposit[]>('POST', '/v1/billing/deposits/refresh');
    expect(stillPending).toHaveLength(1);
    expect(stillPending[0]).toMatchObject({ id: pending.id, status: 'pending', confirmations: 2 });
    expect((await written(p.accountId)).ledger).toHaveLength(0);

    await chain.mine(1);
    const refreshed = await p.client.request<Deposit[]>('POST', '/v1/billing/deposits/refresh');
    expect(refreshed[0]).toMatchObject({ id: pending.id, status: 'credited', confirmations: CONFIRMATIONS });
    await p.client.request('POST', '/v1/billing/deposits/refresh');
    expect((await submitOk(p.client, tx, 200)).status).toBe('credited');
    w = await written(p.accountId);
    expect(w.ledger).toHaveLength(1);
    expect(w.ledger[0]!.ref).toBe(`anvil:${tx.toLowerCase()}:${pending.log_index}`);
    expect(w.balance).toBe(3_000_000);
  });

  it('a pending deposit submitted again once confirmed is credited by that submit (201)', async () => {
    const p = await payer();
    const tx = await usdt.transfer(p.wallet, treasury, 400_000n);
    await submitOk(p.client, tx, 202);
    await chain.mine(CONFIRMATIONS);
    expect((await submitOk(p.client, tx, 201)).status).toBe('credited');
    expect((await written(p.accountId)).balance).toBe(400_000);
  });

  it(`refresh re-checks every pending deposit, past the first ${REFRESH_PAGE}: the newest one (after ${LIST_CAP + 30} older) is credited`, async () => {
    const p = await payer();
    const now = t.clock.now();
    const older = await insertRows(p.accountId, p.wallet.address, LIST_CAP + 30, 'pending', now);
    const tx = await usdt.transfer(p.wallet, treasury, 2_000_000n);
    const real = await submitOk(p.client, tx, 202); // created now: the newest pending deposit, checked last
    await chain.mine(CONFIRMATIONS);
    t.clock.advance(5_000);
    const at = t.clock.now();

    const list = await p.client.request<Deposit[]>('POST', '/v1/billing/deposits/refresh');
    expect(list).toHaveLength(LIST_CAP); // the answer is the (capped) list
    expect(list[0]).toMatchObject({ id: real.id, status: 'credited', confirmations: CONFIRMATIONS + 1 });
    const w = await written(p.accountId);
    expect(w.balance).toBe(2_000_000);
    expect(w.ledger).toHaveLength(1);
    // Every made-up one was looked up (not found on chain: still pending, 0 confirmations, touched now).
    const fake = w.deposits.filter((d) => d.id !== real.id);
    expect(fake).toHaveLength(older.length);
    expect(fake.filter((d) => d.status === 'pending' && d.confirmations === 0 && d.updated_at.getTime() === at.getTime())).toHaveLength(older.length);
  });
});

describe('GET /v1/billing/deposits', () => {
  it('lists newest first', async () => {
    const p = await payer();
    const a = await usdt.transfer(p.wallet, treasury, 100_000n);
    const b = await usdt.transfer(p.wallet, treasury, 200_000n);
    await chain.mine(CONFIRMATIONS);
    const da = await submitOk(p.client, a, 201);
    t.clock.advance(1000);
    const db = await submitOk(p.client, b, 201);
    const list = await p.client.request<Deposit[]>('GET', '/v1/billing/deposits');
    expect(list.map((d) => d.id)).toEqual([db.id, da.id]);
  });

  it(`is capped at ${LIST_CAP}, newest first`, async () => {
    const p = await payer(0n);
    const rows = await insertRows(p.accountId, p.wallet.address, LIST_CAP + 5, 'credited', t.clock.now());
    const list = await p.client.request<Deposit[]>('GET', '/v1/billing/deposits');
    expect(list).toHaveLength(LIST_CAP);
    expect(list.map((d) => d.id)).toEqual(rows.slice(-LIST_CAP).reverse().map((r) => r.id));
    // Another account sees none of them.
    expect(await (await payer(0n)).client.request('GET', '/v1/billing/deposits')).toEqual([]);
  });
});
