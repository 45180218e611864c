import canonicalize from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, type Address, type Hex } from 'viem';
import type { PrivateKeyAccount } from 'viem/accounts';
import type { SvcClient } from '@svc/shared/client';
import { startTestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';
import { deployToken, startChain, type TestChain, type TestToken } from './support/chain.ts';

/**
 * The dark pool end to end: two accounts cross intents, both confirm, the buyer pays the USDT cash leg on a real
 * local chain (anvil) and the settlement is verified and receipted; the asset leg is reported UNAVAILABLE. Terms
 * are sealed at rest; a counterparty's address shows only after both confirm; wrong transfers, the seller
 * settling and a cancel after the match are refused. Without the operator's switch every route answers 501.
 * Signatures are checked with viem against the published signer.
 */

interface Signed { document: Record<string, any>; canonical: string; signature: Hex; signer: string }
interface Intent { id: string; state: string; terms: Record<string, any>; match_id: string | null; history: Array<{ type: string; data: Record<string, any> }> }
interface Match {
  id: string;
  status: string;
  your_side: string;
  your_intent_id: string;
  asset_id: string;
  size: number;
  price_micro_usd: number;
  amount_micro_usd: number;
  you_confirmed_at: string | null;
  counterparty_confirmed: boolean;
  counterparty_settlement_address: string | null;
  settlement_instruction: Signed | null;
  settlement: Signed | null;
  settlement_pending: unknown;
}
interface MatchResult { object: string; matched: boolean; match: Match | null }

let chain: TestChain;
let usdt: TestToken;
let t: Awaited<ReturnType<typeof startTestGateway>>;
let off: Awaited<ReturnType<typeof startTestGateway>>;
let signer: string;
type Who = Awaited<ReturnType<typeof t.signIn>>;
let seller: Who, buyer: Who, stranger: Who;
let sellerWallet: PrivateKeyAccount, buyerWallet: PrivateKeyAccount;

beforeAll(async () => {
  chain = await startChain({ chainId: 31339 });
  usdt = await deployToken(chain);
  const chains = JSON.stringify([{ name: 'local', chain_id: chain.chainId, rpc_url: chain.rpcUrl, usdt: usdt.address, decimals: 6, confirmations: 1 }]);
  [t, off] = await Promise.all([startTestGateway({ env: { SVC_CHAINS: chains, SVC_DARKPOOL_ENABLED: 'true', SVC_DARKPOOL_MATCH_FLOOR_MS: '20' } }), startTestGateway()]);
  [seller, buyer, stranger] = [await t.signIn(), await t.signIn(), await t.signIn()];
  [sellerWallet, buyerWallet] = [await chain.newWallet(), await chain.newWallet()];
  await usdt.mint(buyerWallet.address, 1_000_000_000n);
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
}, 180_000);
afterAll(async () => {
  await Promise.all([t?.close(), off?.close()]);
  await chain?.stop();
});

const intent = (c: SvcClient, body: Record<string, unknown>) => c.request<Intent>('POST', '/v1/intents', { body: { asset_id: 'ACME-1', ...body } });
const ask = (c: SvcClient, id: string) => c.request<MatchResult>('POST', '/v1/matches', { body: { intent_id: id } });
const match = (c: SvcClient, id: string) => c.request<Match>('GET', `/v1/matches/${id}`);
const confirm = (c: SvcClient, id: string) => c.request<Match>('POST', `/v1/matches/${id}/confirm`);
const settle = (c: SvcClient, id: string, tx: string) => c.request<Match>('POST', `/v1/matches/${id}/settle`, { body: { tx_hash: tx } });

async function expectSigned(s: Signed) {
  expect(await recoverMessageAddress({ message: s.canonical, signature: s.signature })).toBe(signer);
  expect(canonicalize(s.document)).toBe(s.canonical);
}

describe('without the operator switch', () => {
  it('answers 501 on every route of the group (after authentication)', async () => {
    const s = await off.signIn();
    const calls: Array<[string, string, unknown?]> = [
      ['POST', '/v1/intents', { asset_id: 'X', side: 'buy', size: 1, limit_price_micro_usd: 1, settlement_address: buyerWallet.address }],
      ['GET', '/v1/intents/int_x'],
      ['POST', '/v1/intents/int_x/cancel'],
      ['POST', '/v1/matches', { intent_id: 'int_x' }],
      ['GET', '/v1/matches/mch_x'],
      ['POST', '/v1/matches/mch_x/confirm'],
      ['POST', '/v1/matches/mch_x/settle', { tx_hash: `0x${'1'.repeat(64)}` }],
      ['GET', '/v1/markets/X/status'],
    ];
    for (const [method, path, body] of calls) {
      const e = await expectApiError(s.client.request(method, path, body === undefined ? {} : { body }), 501, 'not_enabled');
      expect(e.message, path).toContain('SVC_DARKPOOL_ENABLED');
      expect((await fetch(off.url + path, { method })).status, path).toBe(401);
    }
    // Even a malformed body: the switch answers first.
    await expectApiError(s.client.request('POST', '/v1/intents', { body: { nonsense: true } }), 501, 'not_enabled');
  });
});

describe('two accounts cross, confirm and settle the cash leg on anvil', () => {
  let sell: Intent;
  let buy: Intent;
  let m: Match;

  it('seals the terms; shows your own intent opened and another account\'s as not found', async () => {
    sell = await intent(seller.client, { side: 'sell', size: 10, limit_price_micro_usd: 2_000_000, settlement_address: sellerWallet.address });
    expect(sell).toMatchObject({ state: 'resting', terms: { asset_id: 'ACME-1', side: 'sell', size: 10, limit_price_micro_usd: 2_000_000, settlement_address: sellerWallet.address } });
    expect(sell.history.map((h) => h.type)).toEqual(['created']);
    await expectApiError(buyer.client.request('GET', `/v1/intents/${sell.id}`), 404, 'not_found');
    await expectApiError(buyer.client.request('POST', `/v1/intents/${sell.id}/cancel`), 404, 'not_found');
    const row = await t.gw.database.db.selectFrom('darkpool_intents').selectAll().where('id', '=', sell.id).executeTakeFirstOrThrow();
    const raw = Buffer.from(row.terms_sealed).toString('latin1');
    for (const clear of ['ACME-1', 'sell', '2000000', sellerWallet.address.slice(2).toLowerCase()]) expect(raw).not.toContain(clear);
    expect(JSON.stringify(row)).not.toContain('ACME');
  });

  it('finds no counterparty on the same side or across a limit gap; crosses at the midpoint once one exists', async () => {
    const far = await intent(buyer.client, { side: 'buy', size: 8, limit_price_micro_usd: 1_000_000, settlement_address: buyerWallet.address });
    expect(await ask(buyer.client, far.id)).toEqual({ object: 'match_result', matched: false, match: null });
    await buyer.client.request('POST', `/v1/intents/${far.id}/cancel`);
    // The seller's own second intent on the same side never matches it, nor does an intent of the same account.
    const own = await intent(seller.client, { side: 'buy', size: 10, limit_price_micro_usd: 3_000_000, settlement_address: sellerWallet.address });
    expect((await ask(seller.client, own.id)).matched).toBe(false);
    await seller.client.request('POST', `/v1/intents/${own.id}/cancel`);

    buy = await intent(buyer.client, { side: 'buy', size: 8, limit_price_micro_usd: 2_100_000, settlement_address: buyerWallet.address });
    const res = await ask(buyer.client, buy.id);
    expect(res.matched).toBe(true);
    m = res.match!;
    expect(m).toMatchObject({ status: 'pending', your_side: 'buy', your_intent_id: buy.id, asset_id: 'ACME-1', size: 8, price_micro_usd: 2_050_000, amount_micro_usd: 16_400_000 });
    expect(m).toMatchObject({ counterparty_settlement_address: null, settlement_instruction: null, settlement: null, counterparty_confirmed: false });
    // Asking again answers the same match.
    expect((await ask(buyer.client, buy.id)).match!.id).toBe(m.id);
    const s = await seller.client.request<Intent>('GET', `/v1/intents/${sell.id}`);
    expect(s).toMatchObject({ state: 'matched', match_id: m.id });
    expect(s.history.map((h) => h.type)).toEqual(['created', 'matched']);
  });

  it('refuses a cancel after the match (409) and shows the match only to its parties', async () => {
    const e = await expectApiError(seller.client.request('POST', `/v1/intents/${sell.id}/cancel`), 409, 'conflict');
    expect(e.extra.reason).toBe('matched');
    await expectApiError(match(stranger.client, m.id), 404, 'not_found');
    expect(await match(seller.client, m.id)).toMatchObject({ your_side: 'sell', your_intent_id: sell.id, counterparty_settlement_address: null });
  });

  it('refuses to settle before both confirm; reveals addresses and signs the instruction once both have', async () => {
    await expectApiError(settle(buyer.client, m.id, `0x${'2'.repeat(64)}`), 409, 'conflict');
    const s1 = await confirm(seller.client, m.id);
    expect(s1).toMatchObject({ status: 'pending', counterparty_confirmed: false, counterparty_settlement_address: null });
    expect((await confirm(seller.client, m.id)).you_confirmed_at).toBe(s1.you_confirmed_at); // idempotent
    expect((await match(buyer.client, m.id)).counterparty_confirmed).toBe(true);
    const b = await confirm(buyer.client, m.id);
    expect(b).toMatchObject({ status: 'confirmed', counterparty_settlement_address: sellerWallet.address });
    expect((await match(seller.client, m.id)).counterparty_settlement_address).toBe(buyerWallet.address);
    const ins = b.settlement_instruction!;
    await expectSigned(ins);
    expect(ins.document).toMatchObject({
      kind: 'darkpool_settlement_instruction',
      match_id: m.id,
      amount_micro_usd: 16_400_000,
      cash_leg: { chain: 'local', chain_id: chain.chainId, token: usdt.address.toLowerCase(), amount: '16400000', payer: 'buyer', pay_to: sellerWallet.address },
      asset_leg: { deliver_to: buyerWallet.address, status: 'UNAVAILABLE' },
    });
  });

  it('refuses the seller, a short payment and a payment to another address; settles the right transfer once', async () => {
    await expectApiError(settle(seller.client, m.id, `0x${'2'.repeat(64)}`), 403, 'forbidden');
    const short = await usdt.transfer(buyerWallet, sellerWallet.address, 16_399_999n);
    expect((await expectApiError(settle(buyer.client, m.id, short), 422, 'transfer_rejected')).extra.reason).toBe('amount_too_low');
    const elsewhere = await usdt.transfer(buyerWallet, stranger.account.address as Address, 16_400_000n);
    expect((await expectApiError(settle(buyer.client, m.id, elsewhere), 422, 'transfer_rejected')).extra.reason).toBe('wrong_recipient');
    expect((await expectApiError(settle(buyer.client, m.id, `0x${'3'.repeat(64)}`), 422, 'transfer_rejected')).extra.reason).toBe('not_found');
    expect((await match(buyer.client, m.id)).status).toBe('confirmed');

    const paid = await usdt.transfer(buyerWallet, sellerWallet.address, 16_400_000n);
    const done = await settle(buyer.client, m.id, paid);
    expect(done.status).toBe('settled');
    const r = done.settlement!;
    await expectSigned(r);
    expect(r.document).toMatchObject({
      kind: 'darkpool_settlement',
      match_id: m.id,
      cash_leg: { status: 'VERIFIED', tx_hash: paid.toLowerCase(), from: buyerWallet.address, to: sellerWallet.address, amount: '16400000', chain_id: chain.chainId },
      asset_leg: { status: 'UNAVAILABLE' },
    });
    expect(JSON.stringify(r.document)).not.toContain('acct_');
    expect((await settle(buyer.client, m.id, paid)).settlement!.signature).toBe(r.signature); // the same transfer again: the same answer
    await expectApiError(settle(buyer.client, m.id, short), 409, 'conflict');
    expect((await match(seller.client, m.id)).settlement!.signature).toBe(r.signature);
    const history = (await buyer.client.request<Intent>('GET', `/v1/intents/${buy.id}`)).history.map((h) => h.type);
    expect(history).toEqual(['created', 'matched', 'confirmed', 'settlement_instruction_signed', 'settled']);

    // One transfer settles one match: the same payment offered for a second, identical match is refused.
    const sell2 = await intent(seller.client, { side: 'sell', size: 8, limit_price_micro_usd: 2_050_000, settlement_address: sellerWallet.address });
    const buy2 = await intent(buyer.client, { side: 'buy', size: 8, limit_price_micro_usd: 2_050_000, settlement_address: buyerWallet.address });
    const m2 = (await ask(seller.client, sell2.id)).match!;
    expect(m2.your_intent_id).toBe(sell2.id);
    expect(m2.amount_micro_usd).toBe(16_400_000);
    await confirm(seller.client, m2.id);
    await confirm(buyer.client, m2.id);
    expect((await expectApiError(settle(buyer.client, m2.id, paid), 409, 'conflict')).extra.reason).toBe('transfer_used');
    expect((await match(buyer.client, m2.id)).your_intent_id).toBe(buy2.id);
  });
});

describe('racing questions', () => {
  it('two buyers asking at once for the one crossing seller: one match, one negative answer', async () => {
    const other = await t.signIn();
    const s = await intent(seller.client, { asset_id: 'RACE-1', side: 'sell', size: 3, limit_price_micro_usd: 100, settlement_address: sellerWallet.address });
    const b1 = await intent(buyer.client, { asset_id: 'RACE-1', side: 'buy', size: 3, limit_price_micro_usd: 100, settlement_address: buyerWallet.address });
    const b2 = await intent(other.client, { asset_id: 'RACE-1', side: 'buy', size: 3, limit_price_micro_usd: 100, settlement_address: buyerWallet.address });
    const answers = await Promise.all([ask(buyer.client, b1.id), ask(other.client, b2.id)]);
    expect(answers.map((a) => a.matched).sort()).toEqual([false, true]);
    const made = answers.find((a) => a.matched)!.match!;
    const sold = await seller.client.request<Intent>('GET', `/v1/intents/${s.id}`);
    expect(sold).toMatchObject({ state: 'matched', match_id: made.id });
    expect(sold.history.filter((h) => h.type === 'matched')).toHaveLength(1);
    const n = await t.gw.database.db.selectFrom('darkpool_matches').select((eb) => eb.fn.countAll<number>().as('n')).where('sell_intent_id', '=', s.id).executeTakeFirstOrThrow();
    expect(Number(n.n)).toBe(1);
  });
});

describe('intents and market status', () => {
  it('withdraws a resting intent idempotently', async () => {
    const i = await intent(buyer.client, { side: 'buy', size: 1, limit_price_micro_usd: 1, settlement_address: buyerWallet.address });
    const w = await buyer.client.request<Intent & { withdrawn_at: string }>('POST', `/v1/intents/${i.id}/cancel`);
    expect(w.state).toBe('withdrawn');
    const again = await buyer.client.request<Intent & { withdrawn_at: string }>('POST', `/v1/intents/${i.id}/cancel`);
    expect(again.withdrawn_at).toBe(w.withdrawn_at);
    expect(again.history.map((h) => h.type)).toEqual(['created', 'withdrawn']);
    expect(await ask(buyer.client, i.id)).toEqual({ object: 'match_result', matched: false, match: null });
  });

  it('states the rules and your own participation, never depth, counts or prices', async () => {
    const st = await buyer.client.request<Record<string, any>>('GET', '/v1/markets/ACME-1/status');
    expect(st).toMatchObject({ asset_id: 'ACME-1', eligible: true, rules: { cash_leg: { chain: 'local', token: usdt.address.toLowerCase() } } });
    expect(st.your_participation.intents.every((x: { side: string }) => ['buy', 'sell'].includes(x.side))).toBe(true);
    expect(st.your_participation.intents.length).toBeGreaterThanOrEqual(3);
    const strangers = await stranger.client.request<Record<string, any>>('GET', '/v1/markets/ACME-1/status');
    expect(strangers.your_participation.intents).toEqual([]);
    const { your_participation: _a, ...rest } = st;
    const { your_participation: _b, ...rest2 } = strangers;
    expect(rest2).toEqual(rest); // what anyone else sees of the market is the same, however busy it is
    const keys = (v: unknown): string[] => (v && typeof v === 'object' ? Object.entries(v).flatMap(([k, x]) => [k, ...keys(x)]) : []);
    expect(keys(st).filter((k) => /depth|count|last|volume|bid|ask|book|price$/.test(k))).toEqual([]);
    await expectApiError(buyer.client.request('GET', '/v1/markets/bad%20id/status'), 400, 'invalid_request');
  });

  it('refuses bad terms with a 400 naming the field, writing nothing', async () => {
    const count = async () => Number((await t.gw.database.db.selectFrom('darkpool_intents').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const before = await count();
    const good = { side: 'buy', size: 1, limit_price_micro_usd: 1, settlement_address: buyerWallet.address };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ asset_id: 'bad id' }, 'asset_id'],
      [{ side: 'hold' }, 'side'],
      [{ size: 0 }, 'size'],
      [{ size: 1.5 }, 'size'],
      [{ limit_price_micro_usd: -1 }, 'limit_price_micro_usd'],
      [{ size: 1_000_000_000_000, limit_price_micro_usd: 1_000_000_000_000 }, 'size'],
      [{ settlement_address: '0x12' }, 'settlement_address'],
      [{ price: 3 }, 'price'],
    ];
    for (const [extra, param] of cases) {
      const e = await expectApiError(intent(buyer.client, { ...good, ...extra }), 400, 'invalid_request');
      expect(e.param, JSON.stringify(extra)).toBe(param);
    }
    await expectApiError(settle(buyer.client, 'mch_x', '0x12'), 400, 'invalid_request');
    expect(await count()).toBe(before);
  });
});
