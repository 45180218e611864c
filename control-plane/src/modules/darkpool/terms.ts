import { createHash, createHmac } from 'node:crypto';
import { Sealer, invalid } from '@svc/shared';
import { ASSET_ID } from '../../config/darkpool.ts';

export type Side = 'buy' | 'sell';

/** An intent's terms, sealed at rest. `settlement_address` is lowercase 0x-hex. */
export interface Terms {
  asset_id: string;
  side: Side;
  size: number;
  limit_price_micro_usd: number;
  settlement_address: string;
}

/** A match's terms, sealed at rest. */
export interface MatchTerms {
  asset_id: string;
  size: number;
  price_micro_usd: number;
  amount_micro_usd: number;
  buyer_settlement_address: string;
  seller_settlement_address: string;
}

export const SIZE_MAX = 1_000_000_000_000;
export const PRICE_MAX = 1_000_000_000_000;
/** The most an intent may be worth (size times limit price): $1,000,000,000 in micro-USD. */
export const NOTIONAL_MAX = 1_000_000_000_000_000;

export const CROSSING_RULE =
  'A buy and a sell intent of the same asset from different accounts cross when the buy limit is at or above the sell limit. ' +
  'The match price is the midpoint of the two limits, rounded down to a whole micro-USD; the match size is the smaller of the two sizes, ' +
  'and each intent is consumed whole (no remainder keeps resting; submit a new intent for it). Among crossing counterparties the best ' +
  'limit for the asker wins (the lowest sell for a buy, the highest buy for a sell), then the oldest.';

/** The checks of document-level rules the schema cannot state: eligibility and notional. */
export function checkTerms(t: Terms, eligible: string[] | null): void {
  if (!ASSET_ID.test(t.asset_id)) throw invalid('body.asset_id: not an asset id (letters, digits, . _ : -; at most 64)', 'asset_id');
  if (eligible && !eligible.includes(t.asset_id)) throw invalid(`body.asset_id: ${t.asset_id} is not eligible on this gateway (GET /v1/markets/${t.asset_id}/status)`, 'asset_id');
  if (t.size * t.limit_price_micro_usd > NOTIONAL_MAX) throw invalid(`body.size: size times limit_price_micro_usd exceeds ${NOTIONAL_MAX} micro-USD`, 'size');
}

/** Keyed hashes of asset and side (HMAC-SHA256 under a key derived from the seal key): the blind book. */
export class BlindBook {
  private readonly key: Buffer;
  constructor(sealKey: Uint8Array) {
    this.key = createHash('sha256').update('svc-darkpool-book-v1\0').update(sealKey).digest();
  }
  private mac(s: string): string {
    return createHmac('sha256', this.key).update(s).digest('hex');
  }
  book(asset: string, side: Side): string {
    return this.mac(`book\0${asset}\0${side}`);
  }
  asset(asset: string): string {
    return this.mac(`asset\0${asset}`);
  }
}

export const opposite = (s: Side): Side => (s === 'buy' ? 'sell' : 'buy');

export function sealJson(sealer: Sealer, v: unknown, aad: string): Buffer {
  return sealer.seal(JSON.stringify(v), aad);
}
export function openJson<T>(sealer: Sealer, b: Uint8Array, aad: string): T {
  return JSON.parse(sealer.open(b, aad).toString('utf8')) as T;
}

export interface Candidate {
  id: string;
  seq: number;
  account_id: string;
  terms: Terms;
}

/** The counterparty the crossing rule picks for `asker` among resting intents of the other side, or null. */
export function bestCounterparty(asker: Terms, askerAccount: string, candidates: Candidate[]): Candidate | null {
  let best: Candidate | null = null;
  for (const c of candidates) {
    if (c.account_id === askerAccount || c.terms.asset_id !== asker.asset_id || c.terms.side !== opposite(asker.side)) continue;
    const [buy, sell] = asker.side === 'buy' ? [asker, c.terms] : [c.terms, asker];
    if (buy.limit_price_micro_usd < sell.limit_price_micro_usd) continue;
    if (!best) {
      best = c;
      continue;
    }
    const better = asker.side === 'buy' ? c.terms.limit_price_micro_usd < best.terms.limit_price_micro_usd : c.terms.limit_price_micro_usd > best.terms.limit_price_micro_usd;
    const same = c.terms.limit_price_micro_usd === best.terms.limit_price_micro_usd;
    if (better || (same && c.seq < best.seq)) best = c;
  }
  return best;
}

/** The match the crossing rule makes of a buy and a sell intent. */
export function matchTerms(buy: Terms, sell: Terms): MatchTerms {
  const price = Math.floor((buy.limit_price_micro_usd + sell.limit_price_micro_usd) / 2);
  const size = Math.min(buy.size, sell.size);
  return {
    asset_id: buy.asset_id,
    size,
    price_micro_usd: price,
    amount_micro_usd: size * price,
    buyer_settlement_address: buy.settlement_address,
    seller_settlement_address: sell.settlement_address,
  };
}
