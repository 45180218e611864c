import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getAddress, type Address } from 'viem';
import { SvcClient } from '@svc/shared/client';
import type { ChainConfig } from '../control-plane/src/config.ts';
import { ChainRegistry } from '../control-plane/src/modules/billing/chains.ts';
import { TransferVerifier } from '../control-plane/src/modules/billing/verifier.ts';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';

/**
 * Addresses are compared case-insensitively: the configured token contract, treasury and payee are written
 * here in capitals (0xABCD...), while the chain's logs carry EIP-55 mixed case. Real anvil chain and token.
 */
let chain: TestChain;
let usdt: TestToken;
let t: TestGateway;
let treasury: Address;
const upper = (a: string) => `0x${a.slice(2).toUpperCase()}`;
const v = (x: { status: string; reason?: string }) => (x.status === 'rejected' ? x.reason : x.status);

beforeAll(async () => {
  chain = await startChain({ chainId: 31339 });
  usdt = await deployToken(chain);
  treasury = (await chain.newWallet()).address;
  t = await startTestGateway({
    env: {
      SVC_TREASURY_ADDRESS: upper(treasury),
      SVC_CHAINS: JSON.stringify([{ name: 'anvil', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: upper(usdt.address), decimals: 6, confirmations: 1 }]),
    },
  });
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('address case', () => {
  it('the configured addresses and the logs differ only in letter case', async () => {
    const w = await chain.newWallet();
    await usdt.mint(w.address, 1_000_000n);
    const tx = await usdt.transfer(w, treasury, 1_000_000n);
    const log = (await chain.pub.getTransactionReceipt({ hash: tx })).logs[0]!;
    expect(log.address).not.toBe(upper(usdt.address));
    expect(log.address.toLowerCase()).toBe(usdt.address.toLowerCase());
    expect(`0x${log.topics[2]!.slice(26)}`).not.toBe(upper(treasury));
    expect(`0x${log.topics[2]!.slice(26)}`.toLowerCase()).toBe(treasury.toLowerCase());
  });

  it('the verifier matches token and recipient given in any case against the logs', async () => {
    const w = await chain.newWallet();
    await usdt.mint(w.address, 500_000n);
    const tx = await usdt.transfer(w, treasury, 500_000n);
    const c: ChainConfig = { name: 'anvil', chainId: chain.chainId, rpcUrl: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: 1, minDepositMicroUsd: 1 };
    const verifier = new TransferVerifier(new ChainRegistry([c]));
    for (const [token, recipient] of [
      [upper(usdt.address), upper(treasury)],
      [usdt.address.toLowerCase(), getAddress(treasury)],
      [getAddress(usdt.address), treasury.toLowerCase()],
    ]) {
      const v = await verifier.verify({ chain: c, txHash: upper(tx), token: token!, recipient: recipient!, minAmount: 500_000n });
      expect(v, `${token} ${recipient}`).toMatchObject({ status: 'verified', token: usdt.address.toLowerCase(), to: treasury.toLowerCase(), amount: 500_000n });
    }
    // Case is the only thing that may differ: another recipient is still refused.
    const other = await verifier.verify({ chain: c, txHash: tx, token: upper(usdt.address), recipient: upper(w.address), minAmount: 1n });
    expect(v(other)).toBe('wrong_recipient');
  });

  it('a deposit to the capitalised treasury of the capitalised token is credited once', async () => {
    const w = await chain.newWallet();
    await usdt.mint(w.address, 2_000_000n);
    const s = await t.signIn(w);
    const tx = await usdt.transfer(w, treasury, 2_000_000n);
    const d = await s.client.request<Record<string, unknown>>('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: tx } });
    expect(d).toMatchObject({ status: 'credited', to: treasury.toLowerCase(), token: usdt.address.toLowerCase(), from: w.address.toLowerCase(), amount_micro_usd: 2_000_000 });
    const again = await s.client.raw('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: upper(tx) } });
    expect(again.status).toBe(200);
    expect((await s.client.request<{ balance_micro_usd: number }>('GET', '/v1/billing/balance')).balance_micro_usd).toBe(2_000_000);
    const methods = (await (await fetch(`${t.url}/v1/billing/methods`)).json()) as { treasury: string; chains: Array<{ usdt: string }> };
    expect(methods.treasury).toBe(treasury.toLowerCase());
    expect(methods.chains[0]!.usdt).toBe(usdt.address.toLowerCase());
  });

  it('a payment request to a capitalised payee settles with a transfer whose log names it in mixed case', async () => {
    const s = await t.signIn();
    const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await s.client.createKey({ scopes: ['billing'] as never })).key } });
    const payee = (await chain.newWallet()).address;
    const req = await api.request<{ id: string; payee: string }>('POST', '/v1/pay/requests', { body: { chain: 'anvil', payee: upper(payee), amount_micro_usd: 750_000 } });
    expect(req.payee).toBe(payee.toLowerCase());
    const w = await chain.newWallet();
    await usdt.mint(w.address, 750_000n);
    const tx = await usdt.transfer(w, getAddress(payee), 750_000n);
    const settled = await api.request<{ status: string; settlement: { payer: string } }>('POST', `/v1/pay/requests/${req.id}/settle`, { body: { tx_hash: tx } });
    expect(settled).toMatchObject({ status: 'settled', settlement: { payer: w.address.toLowerCase() } });
  });
});
