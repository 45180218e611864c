import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import type { SvcClient } from '@svc/shared/client';
import { ConfigError, loadConfig } from '../control-plane/src/config.ts';
import { freePort, startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { depositPayer, submitDeposit, submitDepositOk, type Deposit } from './support/deposits.ts';
import { CONTRACTS_SOURCE, compileTestContracts, deployForwarder, deployToken, loadTestContracts, sendEther, startChain, type TestChain, type TestToken } from './support/chain.ts';

/**
 * Deposits against a real local chain (anvil from npm) with a real ERC-20 (6 decimals) and real transfers.
 * Required confirmations: 3; anvil mines one block per transaction, so a fresh transfer has 1.
 */
const CONFIRMATIONS = 3;
const MIN_DEPOSIT = 10_000; // micro-USD = 0.01 USDT
let chain: TestChain;
let usdt: TestToken;
let fake: TestToken;
let t: TestGateway;
let treasury: Address;

beforeAll(async () => {
  chain = await startChain();
  [usdt, fake] = [await deployToken(chain), await deployToken(chain, 'Fake Tether', 'USDT')];
  treasury = (await chain.newWallet()).address;
  const deadPort = await freePort();
  t = await startTestGateway({
    env: {
      SVC_TREASURY_ADDRESS: treasury,
      SVC_CHAINS: JSON.stringify([
        { name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: CONFIRMATIONS, min_deposit_micro_usd: MIN_DEPOSIT },
        // An RPC URL that serves another chain id than configured: nothing may be verified on it.
        { name: 'mislabelled', chain_id: 8453, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: 1 },
        // Nothing listens here.
        { name: 'dead', chain_id: 10, rpc_url: `http://127.0.0.1:${deadPort}`, usdt: usdt.address, decimals: 6, confirmations: 1 },
      ]),
    },
  });
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

const payer = (usdtUnits = 100_000_000n) => depositPayer(chain, usdt, t, usdtUnits);
const submit = submitDeposit;
const submitOk = submitDepositOk;

async function written(accountId: string) {
  const db = t.gw.database.db;
  const deposits = await db.selectFrom('billing_deposits').selectAll().where('account_id', '=', accountId).execute();
  const ledger = await db.selectFrom('ledger_entries').selectAll().where('account_id', '=', accountId).execute();
  const pos = await db.selectFrom('credit_accounts').select('balance_micro_usd').where('account_id', '=', accountId).executeTakeFirst();
  return { deposits, ledger, balance: pos?.balance_micro_usd ?? 0 };
}

type Payer = { client: SvcClient; accountId: string };

/**
 * Runs a refusal and checks it wrote nothing: the account's deposits, ledger entries and balance as before,
 * and (given a transaction) no deposit row for it under any account.
 */
async function leavesNothing<T>(p: Payer, refusal: () => Promise<T>, tx?: string): Promise<T> {
  const before = await written(p.accountId);
  const out = await refusal();
  expect(await written(p.accountId)).toEqual(before);
  if (tx) expect(await t.gw.database.db.selectFrom('billing_deposits').select('id').where('tx_hash', '=', tx.toLowerCase()).execute()).toEqual([]);
  return out;
}

/** A 422 transfer_rejected with `reason`, and nothing written. */
async function expectRejected(p: Payer, tx: string, reason: string, extra: Record<string, unknown> = {}) {
  return leavesNothing(p, async () => {
    const e = await expectApiError(p.client.request('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: tx, ...extra } }), 422, 'transfer_rejected');
    expect(e.body?.error.reason).toBe(reason);
    expect(e.message).toContain(reason);
    return e;
  }, tx);
}

describe('GET /v1/billing/methods', () => {
  it('is public and lists the treasury and each chain with its USDT contract, decimals and confirmations; no solana block', async () => {
    const res = await fetch(`${t.url}/v1/billing/methods`);
    expect(res.status).toBe(200);
    const m = (await res.json()) as Record<string, any>;
    expect(m.treasury).toBe(treasury.toLowerCase());
    expect(m.deposit_senders).toBe('linked');
    expect(m.chains).toHaveLength(3);
    expect(m.chains[0]).toEqual({
      name: 'anvil',
      network: `eip155:${chain.chainId}`,
      chain_id: chain.chainId,
      usdt: usdt.address.toLowerCase(),
      decimals: 6,
      confirmations: CONFIRMATIONS,
      min_deposit_micro_usd: MIN_DEPOSIT,
    });
    expect('solana' in m).toBe(false);
  });
});

describe('POST /v1/billing/deposits', () => {
  it('credits a confirmed transfer once: submitted again (also concurrently) it returns the same deposit and one ledger entry', async () => {
    const p = await payer();
    const tx = await usdt.transfer(p.wallet, treasury, 2_500_000n);
    await chain.mine(CONFIRMATIONS - 1);
    const first = await submitOk(p.client, tx, 201);
    expect(first).toMatchObject({
      status: 'credited',
      chain: 'anvil',
      chain_id: chain.chainId,
      tx_hash: tx.toLowerCase(),
      from: p.wallet.address.toLowerCase(),
      to: treasury.toLowerCase(),
      token: usdt.address.toLowerCase(),
      amount: '2500000',
      amount_micro_usd: 2_500_000,
      confirmations: CONFIRMATIONS,
      required_confirmations: CONFIRMATIONS,
      ledger_ref: `anvil:${tx.toLowerCase()}:${first.log_index}`,
    });
    expect(first.credited_at).not.toBeNull();

    const again = await submitOk(p.client, tx.toUpperCase().replace('0X', '0x'), 200);
    expect(again).toEqual(first);
    const burst = await Promise.all(Array.from({ length: 6 }, () => submit(p.client, tx)));
    for (const r of burst) {
      expect(r.status).toBe(200);
      expect(((await r.json()) as Deposit).id).toBe(first.id);
    }
    const w = await written(p.accountId);
    expect(w.deposits).toHaveLength(1);
    expect(w.ledger.map((l) => ({ kind: l.kind, ref: l.ref, amount: l.amount_micro_usd }))).toEqual([{ kind: 'deposit', ref: first.ledger_ref, amount: 2_500_000 }]);
    expect(w.balance).toBe(2_500_000);
    const balance = await p.client.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance');
    expect(balance.balance_micro_usd).toBe(2_500_000);
    const list = await p.client.request<Deposit[]>('GET', '/v1/billing/deposits');
    expect(list).toEqual([first]);
  });

  it('concurrent first submissions of one transfer credit it once', async () => {
    const p = await payer();
    const tx = await usdt.transfer(p.wallet, treasury, 1_000_000n);
    await chain.mine(CONFIRMATIONS);
    const results = await Promise.all(Array.from({ length: 8 }, () => submit(p.client, tx)));
    const codes = results.map((r) => r.status).sort();
    expect(codes.filter((c) => c === 201).length).toBeGreaterThanOrEqual(1);
    expect(codes.every((c) => c === 200 || c === 201)).toBe(true);
    const ids = new Set(await Promise.all(results.map(async (r) => ((await r.json()) as Deposit).id)));
    expect(ids.size).toBe(1);
    const w = await written(p.accountId);
    expect(w.ledger).toHaveLength(1);
    expect(w.balance).toBe(1_000_000);
  });

  it('trusts the logs, not the transaction recipient: a payment through a contract is credited', async () => {
    const p = await payer();
    const fwd = await deployForwarder(chain);
    await usdt.approve(p.wallet, fwd.address, 700_000n);
    const tx = await fwd.pay(p.wallet, usdt.address, treasury, 700_000n);
    const receipt = await chain.pub.getTransactionReceipt({ hash: tx });
    expect(receipt.to?.toLowerCase()).toBe(fwd.address.toLowerCase());
    await chain.mine(CONFIRMATIONS);
    const d = await submitOk(p.client, tx, 201);
    expect(d).toMatchObject({ status: 'credited', amount_micro_usd: 700_000, token: usdt.address.toLowerCase() });
  });

  it('in a transaction with several transfers, credits the one to the treasury; a pinned log to someone else is refused', async () => {
    const p = await payer();
    const other = (await chain.newWallet()).address;
    const tx = await usdt.transferTwo(p.wallet, other, 900_000n, treasury, 600_000n);
    await chain.mine(CONFIRMATIONS);
    const logs = (await chain.pub.getTransactionReceipt({ hash: tx })).logs;
    expect(logs).toHaveLength(2);
    await expectRejected(p, tx, 'wrong_recipient', { log_index: logs[0]!.logIndex });
    await expectRejected(p, tx, 'log_not_found', { log_index: 999 });
    const d = await submitOk(p.client, tx, 201);
    expect(d).toMatchObject({ log_index: logs[1]!.logIndex, amount_micro_usd: 600_000 });
    expect((await submitOk(p.client, tx, 200, { log_index: logs[1]!.logIndex })).id).toBe(d.id);
    expect((await written(p.accountId)).balance).toBe(600_000);
  });

  describe('refusals write nothing (each test checks its own)', () => {
    let p: Awaited<ReturnType<typeof payer>>;
    beforeAll(async () => {
      p = await payer();
    });

    it('a transaction hash that does not exist', async () => {
      await expectRejected(p, `0x${'ab'.repeat(32)}`, 'not_found');
    });

    it('a failed (reverted) transaction', async () => {
      const tx = await usdt.failingTransfer(p.wallet, treasury, 10n ** 15n);
      expect((await chain.pub.getTransactionReceipt({ hash: tx })).status).toBe('reverted');
      await chain.mine(CONFIRMATIONS);
      await expectRejected(p, tx, 'failed');
    });

    it('a transfer that pays someone else', async () => {
      const tx = await usdt.transfer(p.wallet, (await chain.newWallet()).address, 1_000_000n);
      await chain.mine(CONFIRMATIONS);
      const e = await expectRejected(p, tx, 'wrong_recipient');
      expect(e.body?.error.expected_recipient).toBe(treasury.toLowerCase());
    });

    it('a transfer of a different token contract, even to the treasury', async () => {
      await fake.mint(p.wallet.address, 5_000_000n);
      const tx = await fake.transfer(p.wallet, treasury, 5_000_000n);
      await chain.mine(CONFIRMATIONS);
      await expectRejected(p, tx, 'no_transfer_from_token');
      expect(await fake.balanceOf(treasury)).toBe(5_000_000n);
    });

    it('a transaction with no token transfer at all', async () => {
      const tx = await sendEther(chain, p.wallet, treasury, 10n ** 15n);
      await expectRejected(p, tx, 'no_transfer_from_token');
    });

    it('a transfer below the minimum deposit, even unconfirmed', async () => {
      const tx = await usdt.transfer(p.wallet, treasury, BigInt(MIN_DEPOSIT - 1));
      const e = await expectRejected(p, tx, 'amount_too_low');
      expect(e.body?.error.required_amount).toBe(String(MIN_DEPOSIT));
    });

    it('a transfer sent from a wallet not linked to the account', async () => {
      const stranger = await chain.newWallet();
      await usdt.mint(stranger.address, 1_000_000n);
      const tx = await usdt.transfer(stranger, treasury, 1_000_000n);
      await chain.mine(CONFIRMATIONS);
      const e = await expectRejected(p, tx, 'sender_not_linked');
      expect(e.body?.error.from).toBe(stranger.address.toLowerCase());
    });

    it('malformed input and unknown chains are 400 invalid_request', async () => {
      const bad = [
        [{ chain: 'anvil', tx_hash: '0x1234' }, 'tx_hash'],
        [{ chain: 'anvil', tx_hash: 'ab'.repeat(32) }, 'tx_hash'],
        [{ chain: 'anvil', tx_hash: `0x${'zz'.repeat(32)}` }, 'tx_hash'],
        [{ chain: 'anvil' }, 'tx_hash'],
        [{ chain: 'nochain', tx_hash: `0x${'ab'.repeat(32)}` }, 'chain'],
        [{ chain: 'anvil', tx_hash: `0x${'ab'.repeat(32)}`, extra: 1 }, ''],
      ] as const;
      for (const [body, param] of bad) {
        const e = await leavesNothing(p, () => expectApiError(p.client.request('POST', '/v1/billing/deposits', { body }), 400, 'invalid_request'));
        if (param) expect(e.body?.error.param, JSON.stringify(body)).toBe(param);
      }
    });

    it('an RPC node that is down or serves another chain is 502, never a credit', async () => {
      const tx = await usdt.transfer(p.wallet, treasury, 1_000_000n);
      await chain.mine(CONFIRMATIONS);
      for (const c of ['dead', 'mislabelled']) {
        const e = await leavesNothing(p, () => expectApiError(p.client.request('POST', '/v1/billing/deposits', { body: { chain: c, tx_hash: tx } }), 502, 'upstream_error'), tx);
        expect(e.message).not.toContain('127.0.0.1');
      }
      const e = await leavesNothing(p, () => expectApiError(p.client.request('POST', '/v1/billing/deposits', { body: { chain: 'mislabelled', tx_hash: tx } }), 502, 'upstream_error'), tx);
      expect(e.message).toContain(`chain id ${chain.chainId}`);
    });
  });

  it('a transfer already claimed by another account is 409 (credited or pending), and the other account gets nothing', async () => {
    const a = await payer();
    const b = await payer(0n);
    const credited = await usdt.transfer(a.wallet, treasury, 1_200_000n);
    await chain.mine(CONFIRMATIONS);
    await submitOk(a.client, credited, 201);
    const e = await expectApiError(b.client.request('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: credited } }), 409, 'conflict');
    expect(e.body?.error.reason).toBe('claimed_by_another_account');

    const pending = await usdt.transfer(a.wallet, treasury, 300_000n);
    await submitOk(a.client, pending, 202);
    await expectApiError(b.client.request('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: pending } }), 409, 'conflict');
    await chain.mine(CONFIRMATIONS);
    await b.client.request('POST', '/v1/billing/deposits/refresh');
    await a.client.request('POST', '/v1/billing/deposits/refresh');

    expect(await written(b.accountId)).toEqual({ deposits: [], ledger: [], balance: 0 });
    const wa = await written(a.accountId);
    expect(wa.ledger).toHaveLength(2);
    expect(wa.balance).toBe(1_500_000);
  });

  it('session auth: an API key is refused', async () => {
    const p = await payer(0n);
    const key = await p.client.createKey();
    const res = await fetch(`${t.url}/v1/billing/deposits`, { headers: { authorization: `Bearer ${key.key}` } });
    expect(res.status).toBe(401);
  });
});

describe('SVC_DEPOSIT_SENDERS=any', () => {
  it('credits a transfer from any sender to the first account that submits it; a second account gets 409', async () => {
    const open = await startTestGateway({
      env: {
        SVC_TREASURY_ADDRESS: treasury,
        SVC_DEPOSIT_SENDERS: 'any',
        SVC_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: 1 }]),
      },
    });
    try {
      const stranger = await chain.newWallet();
      await usdt.mint(stranger.address, 900_000n);
      const tx = await usdt.transfer(stranger, treasury, 900_000n);
      const [a, b] = [await open.signIn(), await open.signIn()];
      const d = await a.client.request<Deposit>('POST', '/v1/billing/deposits', { body: { chain: `eip155:${chain.chainId}`, tx_hash: tx } });
      expect(d).toMatchObject({ status: 'credited', from: stranger.address.toLowerCase(), amount_micro_usd: 900_000 });
      await expectApiError(b.client.request('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: tx } }), 409, 'conflict');
      expect((await a.client.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance')).balance_micro_usd).toBe(900_000);
      expect((await b.client.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance')).balance_micro_usd).toBe(0);
      const methods = (await (await fetch(`${open.url}/v1/billing/methods`)).json()) as { deposit_senders: string };
      expect(methods.deposit_senders).toBe('any');
    } finally {
      await open.close();
    }
  });
});

describe('configuration', () => {
  const base = { name: 'base', chain_id: 8453, rpc_url: 'https://rpc.example', usdt: `0x${'11'.repeat(20)}`, decimals: 6, confirmations: 3 };
  const problem = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      return (e as ConfigError).problems.join('\n');
    }
    throw new Error(`no error for ${JSON.stringify(env)}`);
  };

  it('parses SVC_CHAINS; unset means no chains', () => {
    expect(loadConfig({}).chains).toEqual([]);
    expect(loadConfig({ SVC_CHAINS: JSON.stringify([base]) }).chains).toEqual([
      { name: 'base', chainId: 8453, rpcUrl: 'https://rpc.example', usdt: `0x${'11'.repeat(20)}`, decimals: 6, confirmations: 3, minDepositMicroUsd: 1 },
    ]);
  });

  it('a bad value stops boot naming the variable and the field', () => {
    const cases: Array<[unknown, string]> = [
      ['not json', 'JSON'],
      [{}, 'array'],
      [[{ ...base, chain_id: 0 }], '[0].chain_id'],
      [[{ ...base, rpc_url: 'ftp://x' }], '[0].rpc_url'],
      [[{ ...base, usdt: '0x12' }], '[0].usdt'],
      [[{ ...base, decimals: 40 }], '[0].decimals'],
      [[{ ...base, confirmations: 0 }], '[0].confirmations'],
      [[{ ...base, name: 'Base!' }], '[0].name'],
      [[{ ...base, confirmation: 3 }], 'confirmation'],
      [[base, { ...base, chain_id: 1 }], 'duplicate name'],
    ];
    for (const [value, needle] of cases) {
      const msg = problem({ SVC_CHAINS: typeof value === 'string' ? value : JSON.stringify(value) });
      expect(msg.startsWith('SVC_CHAINS:'), msg).toBe(true);
      expect(msg).toContain(needle);
    }
    expect(problem({ SVC_SOLANA: '{"rpc_url":"x"}' })).toMatch(/^SVC_SOLANA:/);
    expect(problem({ SVC_DEPOSIT_SENDERS: 'anyone' })).toMatch(/^SVC_DEPOSIT_SENDERS:/);
    const enforced = { SVC_BILLING_ENFORCED: 'true', SVC_TREASURY_ADDRESS: `0x${'22'.repeat(20)}`, SVC_USDT_CONTRACT: base.usdt, SVC_CHAINS: JSON.stringify([base]) };
    expect(problem({ ...enforced, SVC_PAYMENT_NETWORK: 'ethereum' })).toMatch(/^SVC_PAYMENT_NETWORK:/);
    expect(problem({ ...enforced, SVC_USDT_CONTRACT: `0x${'33'.repeat(20)}` })).toMatch(/^SVC_USDT_CONTRACT:/);
    expect(loadConfig({ ...enforced, SVC_PAYMENT_NETWORK: 'eip155:8453' }).chains).toHaveLength(1);
  });
});

describe('test token', () => {
  it('the committed artifact is what the pinned solc builds from the committed source', async () => {
    const art = loadTestContracts();
    expect(art.source_sha256).toBe(createHash('sha256').update(readFileSync(CONTRACTS_SOURCE)).digest('hex'));
    const built = await compileTestContracts();
    expect(built.compiler).toBe(art.compiler);
    expect(built.contracts.TestUSDT!.bytecode).toBe(art.contracts.TestUSDT.bytecode);
    expect(built.contracts.Forwarder!.bytecode).toBe(art.contracts.Forwarder.bytecode);
    expect(await chain.pub.readContract({ address: usdt.address, abi: art.contracts.TestUSDT.abi, functionName: 'decimals' })).toBe(6);
  });
});
