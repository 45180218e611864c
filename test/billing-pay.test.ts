import canonicalize from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, type Address, type Hex } from 'viem';
import { sha256Hex } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';

/**
 * Payment requests against a real local chain: signed invoices, settled by real transfers from payer to
 * payee (the gateway never holds funds), with signed settlement receipts verified by signature recovery.
 */
const CONFIRMATIONS = 2;
let chain: TestChain;
let usdt: TestToken;
let fake: TestToken;
let t: TestGateway;
let api: SvcClient;
let otherApi: SvcClient;
let noScopeApi: SvcClient;
let signer: Address;

interface Signed {
  document: Record<string, any>;
  canonical: string;
  signature: Hex;
  signer: string;
  scheme: string;
}
interface PayRequest {
  id: string;
  status: string;
  chain: string;
  chain_id: number;
  token: string;
  decimals: number;
  payee: string;
  amount: string;
  amount_micro_usd: number;
  memo: string | null;
  created_at: string;
  expires_at: string;
  invoice: Signed;
  settlement: null | { tx_hash: string; log_index: number; payer: string; amount: string; block_number: number; confirmations: number; settled_at: string; receipt: Signed };
  pending: null | { tx_hash: string; log_index: number; confirmations: number; required_confirmations: number };
}

beforeAll(async () => {
  chain = await startChain({ chainId: 31338 });
  usdt = await deployToken(chain);
  fake = await deployToken(chain, 'Not Tether', 'USDT');
  t = await startTestGateway({
    env: {
      SVC_CHAINS: JSON.stringify([{ name: 'local', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: CONFIRMATIONS }]),
    },
  });
  const mk = async (scopes?: string[]) => {
    const s = await t.signIn();
    const key = await s.client.createKey(scopes ? { scopes: scopes as never } : {});
    return new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
  };
  [api, otherApi, noScopeApi] = [await mk(['billing']), await mk(), await mk(['proofs'])];
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: Address }).address;
});
afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

async function payee(): Promise<Address> {
  return (await chain.newWallet()).address;
}
async function payer(units = 50_000_000n) {
  const w = await chain.newWallet();
  await usdt.mint(w.address, units);
  return w;
}
const create = (body: Record<string, unknown>, c = api) => c.request<PayRequest>('POST', '/v1/pay/requests', { body: { chain: 'local', ...body } });
async function settle(id: string, tx: string, status: number, c = api): Promise<PayRequest> {
  const res = await c.raw('POST', `/v1/pay/requests/${id}/settle`, { body: { tx_hash: tx } });
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(status);
  return body as PayRequest;
}
async function expectSignedBy(s: Signed) {
  expect(canonicalize(s.document)).toBe(s.canonical);
  expect(s.signer).toBe(signer);
  expect(await recoverMessageAddress({ message: s.canonical, signature: s.signature })).toBe(signer);
}
async function expectRejected(id: string, tx: string, reason: string) {
  const e = await expectApiError(api.request('POST', `/v1/pay/requests/${id}/settle`, { body: { tx_hash: tx } }), 422, 'transfer_rejected');
  expect(e.body?.error.reason).toBe(reason);
  const after = await api.request<PayRequest>('GET', `/v1/pay/requests/${id}`);
  expect(after.status).toBe('open');
  expect(after.settlement).toBeNull();
}

describe('payment requests', () => {
  it('creates a signed invoice (status open) whose signature recovers to the receipt signer', async () => {
    const to = await payee();
    const r = await create({ payee: to, amount_micro_usd: 1_500_000, memo: 'order 42', expires_in_seconds: 3600 });
    expect(r).toMatchObject({
      status: 'open',
      chain: 'local',
      chain_id: chain.chainId,
      token: usdt.address.toLowerCase(),
      decimals: 6,
      payee: to.toLowerCase(),
      amount: '1500000',
      amount_micro_usd: 1_500_000,
      memo: 'order 42',
      settlement: null,
      pending: null,
    });
    expect(r.id).toMatch(/^payreq_/);
    expect(Date.parse(r.expires_at) - Date.parse(r.created_at)).toBe(3600_000);
    await expectSignedBy(r.invoice);
    expect(r.invoice.document).toMatchObject({ object: 'payment_request', id: r.id, payee: to.toLowerCase(), amount: '1500000', token: usdt.address.toLowerCase(), chain_id: chain.chainId });
    // A tampered invoice does not recover to the signer.
    const tampered = r.invoice.canonical.replace('"amount":"1500000"', '"amount":"1"');
    expect(await recoverMessageAddress({ message: tampered, signature: r.invoice.signature })).not.toBe(signer);
    expect(await api.request('GET', `/v1/pay/requests/${r.id}`)).toEqual(r);
  });

  it('is visible to its own account only, and needs the billing scope', async () => {
    const r = await create({ payee: await payee(), amount_micro_usd: 1 });
    await expectApiError(otherApi.request('GET', `/v1/pay/requests/${r.id}`), 404, 'not_found');
    await expectApiError(otherApi.request('POST', `/v1/pay/requests/${r.id}/settle`, { body: { tx_hash: `0x${'11'.repeat(32)}` } }), 404, 'not_found');
    await expectApiError(api.request('GET', '/v1/pay/requests/payreq_nope'), 404, 'not_found');
    await expectApiError(noScopeApi.request('GET', `/v1/pay/requests/${r.id}`), 403, 'insufficient_scope');
    await expectApiError(create({ payee: await payee(), amount_micro_usd: 1 }, noScopeApi), 403, 'insufficient_scope');
  });

  it('refuses bad input with 400', async () => {
    const to = await payee();
    for (const body of [
      { payee: '0x1234', amount_micro_usd: 1 },
      { payee: to, amount_micro_usd: 0 },
      { payee: to, amount_micro_usd: 1.5 },
      { payee: to, amount_micro_usd: 1, expires_in_seconds: 10 },
      { payee: to, amount_micro_usd: 1, chain: 'mainnet' },
      { payee: to },
    ]) {
      await expectApiError(create(body), 400, 'invalid_request');
    }
    const r = await create({ payee: to, amount_micro_usd: 1 });
    await expectApiError(api.request('POST', `/v1/pay/requests/${r.id}/settle`, { body: { tx_hash: 'nope' } }), 400, 'invalid_request');
  });

  it('settles on chain with a signed receipt; a repeat returns it; its tx hash cannot settle another request', async () => {
    const to = await payee();
    const from = await payer();
    const r = await create({ payee: to, amount_micro_usd: 2_000_000 });
    const tx = await usdt.transfer(from, to, 2_000_000n);
    await chain.mine(CONFIRMATIONS - 1);
    const s = await settle(r.id, tx, 200);
    expect(s.status).toBe('settled');
    expect(s.pending).toBeNull();
    expect(s.settlement).toMatchObject({ tx_hash: tx.toLowerCase(), payer: from.address.toLowerCase(), amount: '2000000', confirmations: CONFIRMATIONS });
    const receipt = s.settlement!.receipt;
    await expectSignedBy(receipt);
    expect(receipt.document).toMatchObject({
      object: 'payment_settlement',
      request_id: r.id,
      invoice_sha256: sha256Hex(r.invoice.canonical),
      chain_id: chain.chainId,
      token: usdt.address.toLowerCase(),
      payee: to.toLowerCase(),
      payer: from.address.toLowerCase(),
      amount_requested: '2000000',
      amount_paid: '2000000',
      tx_hash: tx.toLowerCase(),
      log_index: s.settlement!.log_index,
    });
    // The funds went from payer to payee; the gateway holds nothing.
    expect(await usdt.balanceOf(to)).toBe(2_000_000n);

    expect(await api.request('GET', `/v1/pay/requests/${r.id}`)).toEqual(s);
    expect(await settle(r.id, tx, 200)).toEqual(s);

    const other = await create({ payee: to, amount_micro_usd: 2_000_000 });
    const e = await expectApiError(api.request('POST', `/v1/pay/requests/${other.id}/settle`, { body: { tx_hash: tx } }), 409, 'conflict');
    expect(e.body?.error.reason).toBe('tx_already_used');
    expect((await api.request<PayRequest>('GET', `/v1/pay/requests/${other.id}`)).status).toBe('open');

    const tx2 = await usdt.transfer(from, to, 2_000_000n);
    await chain.mine(CONFIRMATIONS);
    const e2 = await expectApiError(api.request('POST', `/v1/pay/requests/${r.id}/settle`, { body: { tx_hash: tx2 } }), 409, 'conflict');
    expect(e2.body?.error.reason).toBe('already_settled');
    expect((await settle(other.id, tx2, 200)).status).toBe('settled');
  });

  it('too few confirmations answer 202 pending and settle nothing; after more blocks it settles', async () => {
    const to = await payee();
    const from = await payer();
    const r = await create({ payee: to, amount_micro_usd: 750_000 });
    const tx = await usdt.transfer(from, to, 800_000n);
    const p = await settle(r.id, tx, 202);
    expect(p.status).toBe('open');
    expect(p.settlement).toBeNull();
    expect(p.pending).toMatchObject({ tx_hash: tx.toLowerCase(), confirmations: 1, required_confirmations: CONFIRMATIONS });
    expect((await api.request<PayRequest>('GET', `/v1/pay/requests/${r.id}`)).status).toBe('open');
    await chain.mine(1);
    const s = await settle(r.id, tx, 200);
    expect(s.status).toBe('settled');
    expect(s.settlement!.receipt.document.amount_paid).toBe('800000');
  });

  describe('refused settlements leave the request open', () => {
    let to: Address;
    let id: string;
    let from: Awaited<ReturnType<typeof payer>>;
    beforeAll(async () => {
      to = await payee();
      from = await payer();
      id = (await create({ payee: to, amount_micro_usd: 1_000_000 })).id;
    });

    it('a transaction that does not exist', async () => {
      await expectRejected(id, `0x${'cd'.repeat(32)}`, 'not_found');
    });
    it('a failed transaction', async () => {
      await expectRejected(id, await usdt.failingTransfer(from, to, 10n ** 15n), 'failed');
    });
    it('a payment to someone else', async () => {
      await expectRejected(id, await usdt.transfer(from, await payee(), 1_000_000n), 'wrong_recipient');
    });
    it('a payment in a different token', async () => {
      await fake.mint(from.address, 1_000_000n);
      await expectRejected(id, await fake.transfer(from, to, 1_000_000n), 'no_transfer_from_token');
    });
    it('a payment of less than the amount', async () => {
      await expectRejected(id, await usdt.transfer(from, to, 999_999n), 'amount_too_low');
    });
    it('a payment mined before the request existed', async () => {
      const old = await usdt.transfer(from, to, 1_000_000n);
      await chain.mine(CONFIRMATIONS);
      const start = t.clock.now();
      t.clock.advance(3600_000);
      try {
        const later = await create({ payee: to, amount_micro_usd: 1_000_000 });
        const e = await expectApiError(api.request('POST', `/v1/pay/requests/${later.id}/settle`, { body: { tx_hash: old } }), 422, 'transfer_rejected');
        expect(e.body?.error.reason).toBe('predates_request');
      } finally {
        t.clock.set(start);
      }
    });
  });

  it('an expired request cannot be settled (409) and reads as expired', async () => {
    const to = await payee();
    const from = await payer();
    const r = await create({ payee: to, amount_micro_usd: 100_000, expires_in_seconds: 60 });
    const tx = await usdt.transfer(from, to, 100_000n);
    await chain.mine(CONFIRMATIONS);
    const start = t.clock.now();
    t.clock.advance(61_000);
    try {
      expect((await api.request<PayRequest>('GET', `/v1/pay/requests/${r.id}`)).status).toBe('expired');
      const e = await expectApiError(api.request('POST', `/v1/pay/requests/${r.id}/settle`, { body: { tx_hash: tx } }), 409, 'conflict');
      expect(e.body?.error.reason).toBe('expired');
    } finally {
      t.clock.set(start);
    }
    expect((await settle(r.id, tx, 200)).status).toBe('settled');
  });

  it('the OpenAPI document carries the pay and billing routes with their auth', async () => {
    const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { security: unknown; 'x-svc-scope'?: string }>> };
    expect(doc.paths['/v1/pay/requests']!.post!['x-svc-scope']).toBe('billing');
    expect(doc.paths['/v1/pay/requests/{id}/settle']!.post!.security).toEqual([{ apiKey: [] }]);
    expect(doc.paths['/v1/billing/methods']!.get!.security).toEqual([]);
    expect(doc.paths['/v1/billing/deposits/refresh']!.post!.security).toEqual([{ session: [] }, { sessionCookie: [] }]);
  });
});
