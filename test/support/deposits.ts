import { expect } from 'vitest';
import type { SvcClient } from '@svc/shared/client';
import type { TestGateway } from './gateway.ts';
import type { TestChain, TestToken } from './chain.ts';

/** Deposits as the billing tests see them: a paying wallet signed in as its own account, and the submit call. */
export interface Deposit {
  id: string;
  status: string;
  chain: string;
  chain_id: number;
  tx_hash: string;
  log_index: number;
  from: string;
  to: string;
  token: string;
  amount: string;
  amount_micro_usd: number;
  confirmations: number;
  required_confirmations: number;
  ledger_ref: string;
  credited_at: string | null;
}

/** A fresh wallet holding `usdtUnits`, signed in to the gateway as its own account. */
export async function depositPayer(chain: TestChain, usdt: TestToken, t: TestGateway, usdtUnits = 100_000_000n) {
  const wallet = await chain.newWallet();
  if (usdtUnits > 0n) await usdt.mint(wallet.address, usdtUnits);
  const s = await t.signIn(wallet);
  return { wallet, client: s.client, accountId: s.accountId };
}

export const submitDeposit = (c: SvcClient, tx: string, extra: Record<string, unknown> = {}) =>
  c.raw('POST', '/v1/billing/deposits', { body: { chain: 'anvil', tx_hash: tx, ...extra } });

/** Submits a deposit and expects `status`; returns the deposit. */
export async function submitDepositOk(c: SvcClient, tx: string, status: number, extra: Record<string, unknown> = {}): Promise<Deposit> {
  const res = await submitDeposit(c, tx, extra);
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(status);
  return body as Deposit;
}
