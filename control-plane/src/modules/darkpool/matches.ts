import { ServiceError, checksumAddress, newId, notFound } from '@svc/shared';
import { isUniqueViolation } from '../../db/errors.ts';
import { microToBase } from '../billing/units.ts';
import { transferRejected, type TransferVerifier } from '../billing/verifier.ts';
import { type IntentsService } from './intents.ts';
import { appendHistory, insertMatch, intentById, ownedIntent, partyMatch, restingIn, type IntentRow, type MatchRow } from './store.ts';
import { CROSSING_RULE, bestCounterparty, matchTerms, opposite, openJson, sealJson, type MatchTerms } from './terms.ts';

/** Resting intents of the other side opened per question; older ones beyond it wait their turn. */
const SCAN = 500;
/** A settling transfer may be mined this long before the match was confirmed (clock skew between gateway and chain). */
const SKEW_SECONDS = 120;
/** The book key searched when there is nothing to search for: no intent is ever filed under it. */
const NO_BOOK = '0'.repeat(64);
const ASSET_LEG = 'UNAVAILABLE: this gateway does not verify delivery of the asset; the seller delivers it to the buyer\'s settlement address outside the gateway.';

/** The one negative answer of POST /v1/matches, whatever the reason. */
export const NO_MATCH = Object.freeze({ object: 'match_result' as const, matched: false as const, match: null });

/**
 * What answering one question did, for a test to compare the code paths of the negative answers (the dark
 * pool's `traceAnswers` seam; nothing is traced without it): the lookups in order, the book searched (`none`:
 * the dummy one, when there was nothing to look for), how many resting intents it scanned, and the route's hold
 * of the answer to the floor (`elapsed_ms` before it, `held_ms` waited).
 */
export interface MatchTrace {
  lookups: Array<'own_intent' | 'resting_book'>;
  book: 'none' | 'counter_side' | null;
  scanned: number;
  answer: 'no_match' | 'matched';
  floor_ms: number;
  elapsed_ms: number;
  held_ms: number;
}
export type AskTrace = Pick<MatchTrace, 'lookups' | 'book' | 'scanned'>;

const matchNotFound = () => notFound('Match');
const termsAad = (id: string) => `${id}:terms`;
const instructionAad = (id: string) => `${id}:instruction`;
const settlementAad = (id: string) => `${id}:settlement`;

type Signed = { document: Record<string, unknown>; canonical: string; signature: string; signer: string; scheme: string };

/**
 * Matches: asking whether a counterparty exists for one of your intents (a match is made at once when one
 * does), reading a match you are party to, confirming your side (both confirmed: the gateway signs the
 * settlement instruction and each side sees the other's settlement address), and the buyer's settlement with
 * the hash of the USDT transfer, verified on chain and receipted.
 */
export class MatchesService {
  constructor(
    private readonly intents: IntentsService,
    private readonly verifier: TransferVerifier,
  ) {}

  private get d() {
    return this.intents.d;
  }

  private terms(row: MatchRow): MatchTerms {
    return openJson<MatchTerms>(this.intents.sealer, row.terms_sealed, termsAad(row.id));
  }

  private signed(sealed: Uint8Array | null, signature: string | null, aad: string): Signed | null {
    if (!sealed || !signature) return null;
    const canonical = this.intents.sealer.open(sealed, aad).toString('utf8');
    return { document: JSON.parse(canonical) as Record<string, unknown>, canonical, signature, signer: this.d.signer.address, scheme: 'eip191-personal_sign/rfc8785' };
  }

  view(row: MatchRow, accountId: string, pending: { tx_hash: string; confirmations: number; required_confirmations: number } | null = null) {
    const t = this.terms(row);
    const buyer = row.buyer_account_id === accountId;
    const both = row.status !== 'pending';
    return {
      id: row.id,
      object: 'match' as const,
      status: row.status,
      your_side: buyer ? ('buy' as const) : ('sell' as const),
      your_intent_id: buyer ? row.buy_intent_id : row.sell_intent_id,
      asset_id: t.asset_id,
      size: t.size,
      price_micro_usd: t.price_micro_usd,
      amount_micro_usd: t.amount_micro_usd,
      crossing_rule: CROSSING_RULE,
      your_settlement_address: checksumAddress(buyer ? t.buyer_settlement_address : t.seller_settlement_address),
      you_confirmed_at: (buyer ? row.buyer_confirmed_at : row.seller_confirmed_at)?.toISOString() ?? null,
      counterparty_confirmed: (buyer ? row.seller_confirmed_at : row.buyer_confirmed_at) !== null,
      counterparty_settlement_address: both ? checksumAddress(buyer ? t.seller_settlement_address : t.buyer_settlement_address) : null,
      settlement_instruction: this.signed(row.instruction_sealed, row.instruction_signature, instructionAad(row.id)),
      settlement: this.signed(row.settlement_sealed, row.settlement_signature, settlementAad(row.id)),
      settlement_pending: pending,
      created_at: row.created_at.toISOString(),
      confirmed_at: row.confirmed_at?.toISOString() ?? null,
      settled_at: row.settled_at?.toISOString() ?? null,
    };
  }

  async get(accountId: string, id: string) {
    const row = await partyMatch(this.d.db, accountId, id);
    if (!row) throw matchNotFound();
    return this.view(row, accountId);
  }

  /**
   * Whether a counterparty exists for one of the account's intents. Every negative answer is NO_MATCH, and
   * every question runs the same lookups (the own intent, then one side of a book: the dummy one when there is
   * nothing to look for); the route holds every answer to the configured floor.
   */
  async ask(accountId: string, intentId: string, trace?: AskTrace) {
    for (let attempt = 0; attempt < 3; attempt++) {
      const own = await ownedIntent(this.d.db, accountId, intentId);
      trace?.lookups.push('own_intent');
      if (own?.state === 'matched' && own.match_id) return { object: 'match_result' as const, matched: true as const, match: await this.get(accountId, own.match_id) };
      const terms = own?.state === 'resting' ? this.intents.open(own) : null;
      const key = terms ? this.intents.book.book(terms.asset_id, opposite(terms.side)) : NO_BOOK;
      const rows = await restingIn(this.d.db, key, accountId, SCAN);
      if (trace) {
        trace.lookups.push('resting_book');
        trace.book = key === NO_BOOK ? 'none' : 'counter_side';
        trace.scanned += rows.length;
      }
      const best = terms ? bestCounterparty(terms, accountId, rows.map((r) => ({ id: r.id, seq: r.seq, account_id: r.account_id, terms: this.intents.open(r) }))) : null;
      if (!own || !terms || !best) return NO_MATCH;
      const made = await this.make(own, best.id);
      if (made) return { object: 'match_result' as const, matched: true as const, match: this.view(made, accountId) };
      // The counterparty (or this intent) changed meanwhile: look again.
    }
    return NO_MATCH;
  }

  /** Makes the match of two resting intents under both row locks (taken in id order); null when either moved. */
  private async make(own: IntentRow, otherId: string): Promise<MatchRow | null> {
    const now = this.d.clock.now();
    return this.d.db.transaction().execute(async (trx) => {
      const locked = new Map<string, IntentRow>();
      for (const id of [own.id, otherId].sort()) {
        const r = await intentById(trx, id, true);
        if (!r || r.state !== 'resting') return null;
        locked.set(id, r);
      }
      const a = locked.get(own.id)!;
      const b = locked.get(otherId)!;
      const [buy, sell] = this.intents.open(a).side === 'buy' ? [a, b] : [b, a];
      const mt = matchTerms(this.intents.open(buy), this.intents.open(sell));
      const id = newId('mch_');
      const row = await insertMatch(trx, {
        id, buy_intent_id: buy.id, sell_intent_id: sell.id, buyer_account_id: buy.account_id, seller_account_id: sell.account_id, status: 'pending',
        terms_sealed: sealJson(this.intents.sealer, mt, termsAad(id)), buyer_confirmed_at: null, seller_confirmed_at: null, confirmed_at: null,
        instruction_sealed: null, instruction_signature: null, chain_id: null, settle_tx_hash: null, settlement_sealed: null, settlement_signature: null, settled_at: null, created_at: now,
      });
      for (const r of [buy, sell]) {
        await trx.updateTable('darkpool_intents').set({ state: 'matched', match_id: id, matched_at: now }).where('id', '=', r.id).execute();
        await appendHistory(trx, r, 'matched', now, { match_id: id });
      }
      return row;
    });
  }

  /** Confirms the account's side (idempotent); the second confirmation signs the settlement instruction. */
  async confirm(accountId: string, id: string) {
    const now = this.d.clock.now();
    const chain = this.d.config.chain!;
    const row = await this.d.db.transaction().execute(async (trx) => {
      const m = await partyMatch(trx, accountId, id, true);
      if (!m) throw matchNotFound();
      const buyer = m.buyer_account_id === accountId;
      if ((buyer ? m.buyer_confirmed_at : m.seller_confirmed_at) || m.status !== 'pending') return m;
      const set = buyer ? { buyer_confirmed_at: now } : { seller_confirmed_at: now };
      const next = { ...m, ...set };
      const mine = (await intentById(trx, buyer ? m.buy_intent_id : m.sell_intent_id))!;
      await appendHistory(trx, mine, 'confirmed', now, { match_id: id });
      if (next.buyer_confirmed_at && next.seller_confirmed_at) {
        const t = this.terms(m);
        const instruction = this.d.signer.signDocument({
          v: 1,
          kind: 'darkpool_settlement_instruction',
          match_id: id,
          asset_id: t.asset_id,
          size: t.size,
          price_micro_usd: t.price_micro_usd,
          amount_micro_usd: t.amount_micro_usd,
          cash_leg: { chain: chain.name, chain_id: chain.chainId, token: chain.usdt, decimals: chain.decimals, amount: microToBase(t.amount_micro_usd, chain.decimals).toString(), payer: 'buyer', pay_to: checksumAddress(t.seller_settlement_address) },
          asset_leg: { deliver_to: checksumAddress(t.buyer_settlement_address), status: 'UNAVAILABLE', note: ASSET_LEG },
          confirmed_at: now.toISOString(),
          signer: this.d.signer.address,
        });
        Object.assign(set, { status: 'confirmed' as const, confirmed_at: now, instruction_sealed: this.intents.sealer.seal(instruction.canonical, instructionAad(id)), instruction_signature: instruction.signature });
        for (const iid of [m.buy_intent_id, m.sell_intent_id]) await appendHistory(trx, (await intentById(trx, iid))!, 'settlement_instruction_signed', now, { match_id: id });
      }
      return trx.updateTable('darkpool_matches').set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
    });
    return this.view(row, accountId);
  }

  /**
   * The buyer submits the hash of the USDT transfer to the seller's settlement address. Verified on the dark
   * pool's chain (token, recipient, at least the amount, mined no earlier than the confirmation, enough
   * confirmations), then receipted; the asset leg is reported UNAVAILABLE. 202 while confirmations are missing.
   */
  async settle(accountId: string, id: string, txHash: string): Promise<{ status: 200 | 202; body: ReturnType<MatchesService['view']> }> {
    const tx = txHash.toLowerCase();
    const m = await partyMatch(this.d.db, accountId, id);
    if (!m) throw matchNotFound();
    if (m.seller_account_id === accountId) throw new ServiceError('forbidden', 'Only the buyer settles a match: the buyer pays the cash leg and submits the transfer hash', { reason: 'not_buyer' });
    if (m.status === 'settled') {
      if (m.settle_tx_hash === tx) return { status: 200, body: this.view(m, accountId) };
      throw new ServiceError('conflict', `This match is already settled by transaction ${m.settle_tx_hash}`, { reason: 'already_settled' });
    }
    if (m.status !== 'confirmed') throw new ServiceError('conflict', 'Both sides must confirm the match before it settles', { reason: 'not_confirmed' });
    const chain = this.d.config.chain!;
    const t = this.terms(m);
    const v = await this.verifier.verify({
      chain,
      txHash: tx,
      token: chain.usdt,
      recipient: t.seller_settlement_address,
      minAmount: microToBase(t.amount_micro_usd, chain.decimals),
      notBeforeSeconds: Math.floor(m.confirmed_at!.getTime() / 1000) - SKEW_SECONDS,
    });
    if (v.status === 'rejected') throw transferRejected(v);
    if (v.status === 'pending') return { status: 202, body: this.view(m, accountId, { tx_hash: tx, confirmations: v.confirmations, required_confirmations: v.required }) };
    const now = this.d.clock.now();
    const receipt = this.d.signer.signDocument({
      v: 1,
      kind: 'darkpool_settlement',
      match_id: id,
      asset_id: t.asset_id,
      size: t.size,
      price_micro_usd: t.price_micro_usd,
      amount_micro_usd: t.amount_micro_usd,
      cash_leg: { status: 'VERIFIED', chain: chain.name, chain_id: chain.chainId, token: chain.usdt, tx_hash: tx, log_index: v.logIndex, from: checksumAddress(v.from), to: checksumAddress(v.to), amount: v.amount.toString(), block_number: Number(v.blockNumber), confirmations: v.confirmations },
      asset_leg: { status: 'UNAVAILABLE', note: ASSET_LEG },
      settled_at: now.toISOString(),
      signer: this.d.signer.address,
    });
    try {
      const row = await this.d.db.transaction().execute(async (trx) => {
        const cur = (await partyMatch(trx, accountId, id, true))!;
        if (cur.status === 'settled') return cur; // settled meanwhile; the answer below says by what
        const r = await trx
          .updateTable('darkpool_matches')
          .set({ status: 'settled', chain_id: chain.chainId, settle_tx_hash: tx, settled_at: now, settlement_sealed: this.intents.sealer.seal(receipt.canonical, settlementAad(id)), settlement_signature: receipt.signature })
          .where('id', '=', id)
          .returningAll()
          .executeTakeFirstOrThrow();
        for (const iid of [m.buy_intent_id, m.sell_intent_id]) await appendHistory(trx, (await intentById(trx, iid, true))!, 'settled', now, { match_id: id, cash_leg: 'VERIFIED', asset_leg: 'UNAVAILABLE' });
        return r;
      });
      if (row.settle_tx_hash !== tx) throw new ServiceError('conflict', `This match is already settled by transaction ${row.settle_tx_hash}`, { reason: 'already_settled' });
      return { status: 200, body: this.view(row, accountId) };
    } catch (e) {
      if (isUniqueViolation(e)) throw new ServiceError('conflict', `Transaction ${tx} already settled another match`, { reason: 'transfer_used' });
      throw e;
    }
  }
}
