import { createServer, type Server } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { createWalletClient, erc20Abi, http, type Address } from 'viem';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { ApiError, type SvcClient } from '@svc/shared/client';
import { PaymentRequiredV1Schema } from '@x402/core/schemas';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { startChain, type TestChain } from './support/chain.ts';
import { deployEip3009Token, type Eip3009Token } from './support/eip3009.ts';
import { x402Buyer } from './support/x402-buyer.ts';

/**
 * The marketplace end to end on a local anvil chain: services published by a seller, paid per call by a
 * buyer with the stock x402 client (@x402/fetch over @x402/core and @x402/evm) in an EIP-3009 token compiled
 * with solc. The gateway verifies and submits the authorization as facilitator: tokens go buyer to seller and
 * never through the gateway. Anvil runs with chain id 84532 so x402 version 1 names it `base-sepolia`.
 */
const PRICE = 250_000; // $0.25 = 250000 base units at 6 decimals
let chain: TestChain;
let token: Eip3009Token;
let t: TestGateway;
let seller: { client: SvcClient; account: PrivateKeyAccount; accountId: string };
let facilitator: PrivateKeyAccount;
let endpoint: Server;
let endpointUrl: string;
const hits: Array<{ path: string; body: string; headers: Record<string, unknown> }> = [];

beforeAll(async () => {
  chain = await startChain({ chainId: 84532 });
  token = await deployEip3009Token(chain, 'USD Coin', '2');
  const key = generatePrivateKey();
  facilitator = privateKeyToAccount(key);
  await chain.pub.request({ method: 'anvil_setBalance' as never, params: [facilitator.address, '0xde0b6b3a7640000'] as never });
  const dir = mkdtempSync(join(tmpdir(), 'svc-market-'));
  writeFileSync(join(dir, 'facilitator.key'), key);
  endpoint = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      hits.push({ path: req.url ?? '', body, headers: req.headers });
      if (req.url === '/fail') {
        res.writeHead(500, { 'content-type': 'text/plain' }).end('broken');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ echo: JSON.parse(body || 'null'), paid_by: req.headers['x-svc-payer'] }));
    });
  });
  await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', () => r()));
  endpointUrl = `http://127.0.0.1:${(endpoint.address() as { port: number }).port}`;
  t = await startTestGateway({
    env: {
      SVC_CHAINS: JSON.stringify([{ name: 'local', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: token.address, decimals: 6, confirmations: 1 }]),
      SVC_MARKET_X402: JSON.stringify({ chain: 'local', name: 'USD Coin', version: '2' }),
      SVC_MARKET_FACILITATOR_KEY_FILE: join(dir, 'facilitator.key'),
      SVC_MARKET_SETTLE_TIMEOUT_MS: '1500',
    },
  });
  seller = await t.signIn();
  await seller.client.request('POST', '/v1/passport', { body: { handle: 'acme-seller' } });
}, 120_000);

afterAll(async () => {
  await t?.close();
  await chain?.stop();
  await new Promise((r) => endpoint?.close(r));
});

const publish = (body: Record<string, unknown>, c: SvcClient = seller.client) =>
  c.request<any>('POST', '/v1/services', { body: { kind: 'endpoint', endpoint_url: `${endpointUrl}/echo`, price_micro_usd: PRICE, payee: seller.account.address, description: 'Echoes its input', ...body } });

async function buyer(units = 5_000_000n) {
  const w = await chain.newWallet();
  await token.mint(w.address, units);
  return { account: w, ...x402Buyer(w) };
}

const invokeUrl = (slug: string) => `${t.url}/v1/services/${slug}/invoke`;
const post = (slug: string, headers: Record<string, string> = {}, body: unknown = { q: 1 }) =>
  fetch(invokeUrl(slug), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

/**
 * A 402 with the terms: the body is x402 version 1's PaymentRequired as @x402/core's schema defines it (`error` a
 * string), the gateway's error object beside it in `svc_error`, which the API client reads as the envelope.
 */
async function refusal(res: Response, reason: string) {
  expect(res.status).toBe(402);
  const body = (await res.json()) as any;
  const v1 = PaymentRequiredV1Schema.safeParse(body);
  expect(v1.error?.issues ?? []).toEqual([]);
  expect(v1.data).toMatchObject({ x402Version: 1, error: expect.stringMatching(new RegExp(`^${reason}: `)) });
  expect(body.svc_error).toMatchObject({ type: 'payment_required', reason, request_id: res.headers.get('x-request-id') });
  const e = new ApiError(res.status, body, res.headers);
  expect({ type: e.type, reason: e.extra.reason, payment: e.payment, insufficientCredit: e.isInsufficientCredit() }).toEqual({ type: 'payment_required', reason, payment: body, insufficientCredit: false });
  expect(body.accepts[0]).toMatchObject({ scheme: 'exact', network: 'base-sepolia', payTo: seller.account.address.toLowerCase(), asset: token.address.toLowerCase() });
  const v2 = decodePaymentRequiredHeader(res.headers.get('payment-required')!) as any;
  expect(v2.x402Version).toBe(2);
  expect(v2.accepts[0]).toMatchObject({ network: 'eip155:84532', amount: String(PRICE) });
  return body;
}

describe('publishing', () => {
  it('refuses bad input naming the field, and writes nothing', async () => {
    const other = privateKeyToAccount(generatePrivateKey());
    expect((await expectApiError(publish({ slug: 'not-mine', payee: other.address }), 400, 'invalid_request')).param).toBe('payee');
    expect((await expectApiError(publish({ slug: 'zero', price_micro_usd: 0 }), 400, 'invalid_request')).param).toBe('price_micro_usd');
    expect((await expectApiError(publish({ slug: 'absurd', price_micro_usd: 10 ** 15 }), 400, 'invalid_request')).param).toBe('price_micro_usd');
    expect((await expectApiError(publish({ slug: 'Bad Slug' }), 400, 'invalid_request')).param).toBe('slug');
    expect((await expectApiError(publish({ slug: 'directory' }), 400, 'invalid_request')).param).toBe('slug');
    expect((await expectApiError(publish({ slug: 'no-agent', kind: 'agent', endpoint_url: undefined }), 400, 'invalid_request')).param).toBe('agent_id');
    expect((await expectApiError(publish({ slug: 'bad-url', endpoint_url: 'ftp://example.com/x' }), 400, 'invalid_request')).param).toBe('endpoint_url');
    const list = await seller.client.request<any>('GET', '/v1/services');
    expect(list.services).toEqual([]);
  });

  it('publishes, lists in the directory with the seller handle, and shows x402 terms', async () => {
    const s = await publish({ slug: 'echo' });
    expect(s).toMatchObject({ slug: 'echo', kind: 'endpoint', price_micro_usd: PRICE, payee: seller.account.address.toLowerCase(), status: 'active', delivered_calls: 0 });
    await expectApiError(publish({ slug: 'echo' }), 409, 'conflict');
    const dir = (await (await fetch(`${t.url}/v1/services/directory`)).json()) as any;
    expect(dir.ordering).toBe('delivered_calls desc, slug asc');
    expect(dir.settlement).toMatchObject({ scheme: 'exact', network: 'eip155:84532', asset: token.address.toLowerCase(), facilitator: facilitator.address.toLowerCase() });
    expect(dir.services).toContainEqual(expect.objectContaining({ slug: 'echo', seller_handle: 'acme-seller', delivered_calls: 0, price_micro_usd: PRICE }));
    const terms = (await (await fetch(`${t.url}/v1/services/echo`)).json()) as any;
    expect(terms.accepts).toEqual([
      expect.objectContaining({ scheme: 'exact', network: 'base-sepolia', maxAmountRequired: String(PRICE), payTo: seller.account.address.toLowerCase(), asset: token.address.toLowerCase(), extra: { name: 'USD Coin', version: '2', decimals: 6 } }),
    ]);
    expect(terms.x402_v2.accepts[0]).toMatchObject({ network: 'eip155:84532', amount: String(PRICE) });
    expect(PaymentRequiredV1Schema.safeParse(terms).success).toBe(true); // the terms read as version 1 PaymentRequired too
  });
});

describe('invoke', () => {
  it('answers 402 with the terms without a payment, and with a reason for a malformed one', async () => {
    await refusal(await post('echo'), 'payment_missing');
    await refusal(await post('echo', { 'x-payment': 'not base64 at all!' }), 'malformed_payment');
    await refusal(await post('echo', { 'payment-signature': Buffer.from('{"x402Version":2}').toString('base64') }), 'malformed_payment');
    expect(hits).toHaveLength(0);
  });

  it('a buyer pays through the stock x402 client: tokens move buyer to seller, never through the gateway; a replay is refused', async () => {
    const b = await buyer();
    const before = { buyer: await token.balanceOf(b.account.address), seller: await token.balanceOf(seller.account.address) };
    const res = await b.fetch(invokeUrl('echo'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ hello: 'world' }) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body).toMatchObject({ object: 'service_call', service: 'echo', status: 'delivered', result: { echo: { hello: 'world' }, paid_by: b.account.address.toLowerCase() } });
    expect(body.payment).toMatchObject({ x402_version: 2, network: 'eip155:84532', payer: b.account.address.toLowerCase(), payee: seller.account.address.toLowerCase(), amount: String(PRICE) });
    const settle = decodePaymentResponseHeader(res.headers.get('x-payment-response')!);
    expect(settle).toMatchObject({ success: true, transaction: body.payment.tx_hash, network: 'eip155:84532' });
    expect(await token.balanceOf(b.account.address)).toBe(before.buyer - BigInt(PRICE));
    expect(await token.balanceOf(seller.account.address)).toBe(before.seller + BigInt(PRICE));
    expect(await token.balanceOf(facilitator.address)).toBe(0n);
    const tx = await chain.pub.getTransaction({ hash: body.payment.tx_hash });
    expect(tx.from.toLowerCase()).toBe(facilitator.address.toLowerCase());
    // The receipt verifies against the gateway's signer.
    const v = (await (await fetch(`${t.url}/v1/receipts/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ receipt: res.headers.get('x-svc-receipt'), signature: res.headers.get('x-svc-signature') }) })).json()) as any;
    expect(v.valid).toBe(true);
    expect(v.payload).toMatchObject({ kind: 'service_call', service: 'echo', payment: { tx_hash: body.payment.tx_hash } });
    // The same signed payment again: refused before anything runs, nothing moves.
    const n = hits.length;
    const again = await post('echo', b.sent.at(-1)!, { hello: 'world' });
    await refusal(again, 'payment_reused');
    expect(hits.length).toBe(n);
    expect(await token.balanceOf(b.account.address)).toBe(before.buyer - BigInt(PRICE));
  });

  it('takes x402 version 1 in X-PAYMENT and answers in version 1', async () => {
    const b = await buyer();
    const terms = await (await post('echo')).json();
    const header = await b.payloadV1(terms);
    const res = await post('echo', { 'x-payment': header });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.payment).toMatchObject({ x402_version: 1, network: 'base-sepolia' });
    expect(decodePaymentResponseHeader(res.headers.get('x-payment-response')!)).toMatchObject({ success: true, network: 'base-sepolia' });
    expect(res.headers.get('payment-response')).toBeNull();
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n - BigInt(PRICE));
  });

  it('refuses underpaid, expired, misdirected, other-chain and wrong-domain payments before anything runs', async () => {
    const b = await buyer();
    const required = (await post('echo')).headers.get('payment-required')!;
    const n = hits.length;
    const cases: Array<[string, (r: Record<string, any>) => void]> = [
      ['underpaid', (r) => (r.amount = String(PRICE - 1))],
      ['expired', (r) => (r.maxTimeoutSeconds = -60)],
      ['wrong_payee', (r) => (r.payTo = privateKeyToAccount(generatePrivateKey()).address)],
      ['wrong_network', (r) => (r.network = 'eip155:1')],
      ['invalid_signature', (r) => (r.extra = { ...r.extra, name: 'Not USD Coin' })],
      ['invalid_signature', (r) => (r.extra = { ...r.extra, version: '1' })],
    ];
    for (const [reason, change] of cases) {
      const res = await post('echo', { 'payment-signature': await b.payloadV2(required, change) });
      const body = await refusal(res, reason);
      expect(body.svc_error.message).toBeTruthy();
    }
    expect(hits.length).toBe(n);
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n);
    const calls = await seller.client.request<any>('GET', '/v1/services/manage/echo/calls');
    expect(calls.calls.every((c: any) => c.status === 'delivered')).toBe(true);
  });

  it('a payment identifier replays the first answer without a second transfer; another payload under it is 409', async () => {
    const b = await buyer();
    const required = (await post('echo')).headers.get('payment-required')!;
    const id = { 'payment-identifier': { info: { required: false, id: 'pay_0123456789abcdef01' } } };
    const header = await b.payloadV2(required, undefined, id);
    const first = await post('echo', { 'payment-signature': header });
    expect(first.status).toBe(200);
    const firstBody = await first.json();
    const second = await post('echo', { 'payment-signature': header });
    expect(second.status).toBe(200);
    expect(await second.json()).toEqual(firstBody);
    expect(second.headers.get('x-svc-replayed')).toBe('true');
    expect(second.headers.get('x-payment-response')).toBe(first.headers.get('x-payment-response'));
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n - BigInt(PRICE));
    const other = await b.payloadV2(required, undefined, id);
    const conflict = await post('echo', { 'payment-signature': other });
    expect(conflict.status).toBe(409);
    expect(((await conflict.json()) as any).error.type).toBe('idempotency_conflict');
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n - BigInt(PRICE));
  });

  it('a call that fails after payment is answered 502 naming the settled payment, and recorded', async () => {
    await publish({ slug: 'flaky', endpoint_url: `${endpointUrl}/fail` });
    const b = await buyer();
    const res = await b.fetch(invokeUrl('flaky'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"x":1}' });
    expect(res.status).toBe(502);
    const body = (await res.json()) as any;
    expect(body.error).toMatchObject({ type: 'upstream_error', reason: 'endpoint_error', service: 'flaky' });
    expect(body.error.payment.tx_hash).toMatch(/^0x[0-9a-f]{64}$/);
    expect(body.error.message).toContain(body.error.payment.tx_hash);
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n - BigInt(PRICE));
    const calls = await seller.client.request<any>('GET', '/v1/services/manage/flaky/calls');
    expect(calls).toMatchObject({ slug: 'flaky' });
    expect(calls.calls).toHaveLength(1);
    expect(calls.calls[0]).toMatchObject({ status: 'failed', error: { type: 'endpoint_error' }, payment: { tx_hash: body.error.payment.tx_hash } });
  });
});

describe('a payment not confirmed in time', () => {
  const automine = (on: boolean) => chain.pub.request({ method: 'evm_setAutomine' as never, params: [on] as never });
  const mine = () => chain.pub.request({ method: 'evm_mine' as never, params: [] as never });
  afterEach(() => automine(true));

  /** Publishes `slug` and pays it with mining off: the 504 of a payment left unmined (mining stays off). */
  async function unmined(slug: string, units?: bigint, paymentId?: string) {
    await publish({ slug });
    const b = await buyer(units);
    const id = paymentId ? { 'payment-identifier': { info: { required: false, id: paymentId } } } : undefined;
    const header = await b.payloadV2((await post(slug)).headers.get('payment-required')!, undefined, id);
    const before = hits.length;
    await automine(false);
    const res = await post(slug, { 'payment-signature': header });
    expect(res.status).toBe(504);
    const first = ((await res.json()) as any).error;
    expect(first).toMatchObject({ type: 'upstream_timeout', call_id: expect.stringMatching(/^scall_/), tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    return { b, header, before, first };
  }

  it('is 504 naming its transaction; the same payment again is 409 while unmined, then runs the service once it confirms, once, and replays its answer', async () => {
    const { b, header, before, first } = await unmined('slow-chain', undefined, 'pay_slowchain0123456789');
    const pending = await post('slow-chain', { 'payment-signature': header });
    expect(pending.status).toBe(409);
    const p = ((await pending.json()) as any).error;
    expect(p).toMatchObject({ type: 'conflict', reason: 'in_progress', call_id: first.call_id });
    expect(p.message).toContain(first.tx_hash);
    expect(hits.length).toBe(before);
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n);
    await automine(true);
    await mine();
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n - BigInt(PRICE));

    const resumed = await post('slow-chain', { 'payment-signature': header });
    expect(resumed.status).toBe(200);
    const body = (await resumed.json()) as any;
    expect(body).toMatchObject({ object: 'service_call', id: first.call_id, status: 'delivered', result: { echo: { q: 1 } }, payment: { tx_hash: first.tx_hash, amount_micro_usd: PRICE } });
    expect(hits.length).toBe(before + 1);
    const again = await post('slow-chain', { 'payment-signature': header });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-svc-replayed')).toBe('true');
    expect(await again.json()).toEqual(body);
    expect(hits.length).toBe(before + 1);
    expect(await token.balanceOf(b.account.address)).toBe(5_000_000n - BigInt(PRICE));
    const calls = await seller.client.request<any>('GET', '/v1/services/manage/slow-chain/calls');
    expect(calls.calls).toHaveLength(1);
    expect(calls.calls[0]).toMatchObject({ status: 'delivered', payment: { tx_hash: first.tx_hash } });
  });

  it('whose transaction then reverts drops its claim: the same payment again is 402 and nothing ran', async () => {
    const { b, header, before, first } = await unmined('slow-revert', BigInt(PRICE)); // no payment identifier: resumed by its authorization
    // The buyer spends the tokens first (a higher tip, mined ahead), so the authorization's transfer reverts.
    const wallet = createWalletClient({ account: b.account, chain: chain.chain, transport: http(chain.rpcUrl) });
    await wallet.writeContract({ address: token.address, abi: erc20Abi, functionName: 'transfer', args: [facilitator.address, BigInt(PRICE)], gas: 100_000n, maxPriorityFeePerGas: 50_000_000_000n, maxFeePerGas: 100_000_000_000n });
    await automine(true);
    await mine();
    expect((await chain.pub.getTransactionReceipt({ hash: first.tx_hash })).status).toBe('reverted');
    await refusal(await post('slow-revert', { 'payment-signature': header }), 'payment_invalid');
    expect(hits.length).toBe(before);
    const calls = await seller.client.request<any>('GET', '/v1/services/manage/slow-revert/calls');
    expect(calls.calls).toHaveLength(0);
  });
});

describe('managing', () => {
  it('lists calls with payment metadata and no content, and services with delivered calls and revenue', async () => {
    const calls = await seller.client.request<any>('GET', '/v1/services/manage/echo/calls');
    expect(calls.slug).toBe('echo');
    expect(calls.service_id).toMatch(/^svc_/);
    expect(calls.calls.length).toBe(3);
    for (const c of calls.calls) {
      expect(c.payment.tx_hash).toMatch(/^0x/);
      expect(c.request_sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(c.receipt.signature).toMatch(/^0x/);
      expect(JSON.stringify(c)).not.toContain('world');
    }
    const list = await seller.client.request<any>('GET', '/v1/services');
    const echo = list.services.find((s: any) => s.slug === 'echo');
    expect(echo).toMatchObject({ delivered_calls: 3, revenue: { amount: String(3 * PRICE), amount_micro_usd: 3 * PRICE } });
    const flaky = list.services.find((s: any) => s.slug === 'flaky');
    expect(flaky).toMatchObject({ delivered_calls: 0, revenue: { amount: String(PRICE) } });
    const dir = (await (await fetch(`${t.url}/v1/services/directory`)).json()) as any;
    expect(dir.services[0].slug).toBe('echo');
  });

  it('updates, unlists, disables and retires; a retired slug stays reserved and its history remains', async () => {
    const other = await t.signIn();
    await expectApiError(other.client.request('PATCH', '/v1/services/manage/echo', { body: { price_micro_usd: 1 } }), 404, 'not_found');
    expect((await expectApiError(seller.client.request('PATCH', '/v1/services/manage/echo', { body: { price_micro_usd: 0 } }), 400, 'invalid_request')).param).toBe('price_micro_usd');
    const u = await seller.client.request<any>('PATCH', '/v1/services/manage/echo', { body: { price_micro_usd: 300_000, listed: false } });
    expect(u).toMatchObject({ price_micro_usd: 300_000, listed: false });
    const dir = (await (await fetch(`${t.url}/v1/services/directory`)).json()) as any;
    expect(dir.services.map((s: any) => s.slug)).not.toContain('echo');
    await seller.client.request('PATCH', '/v1/services/manage/echo', { body: { enabled: false } });
    const off = await post('echo');
    expect(off.status).toBe(409);
    const r = await seller.client.request<any>('DELETE', '/v1/services/manage/echo');
    expect(r).toMatchObject({ status: 'retired', delivered_calls: 3 });
    expect((await fetch(`${t.url}/v1/services/echo`)).status).toBe(404);
    expect((await post('echo')).status).toBe(404);
    const again = await expectApiError(publish({ slug: 'echo' }), 409, 'conflict');
    expect(again.body!.error.reason).toBe('slug_retired');
    expect((await seller.client.request<any>('GET', '/v1/services/manage/echo/calls')).calls).toHaveLength(3);
    await expectApiError(seller.client.request('PATCH', '/v1/services/manage/echo', { body: { enabled: true } }), 409, 'conflict');
  });
});
