import { createHash } from 'node:crypto';
import { canonicalize } from '@svc/shared';
import { add, decToString, div, isNegative, isZero, mul, parseDec, sub, sum, ZERO, type Dec } from './decimal.ts';

/** How NAV is computed; each record states it. */
export const METHODOLOGY = {
  name: 'svc.nav/1',
  formula: 'net_asset_value = sum(quantity x price) + cash - liabilities; nav_per_share = net_asset_value / shares_outstanding',
  arithmetic: 'exact decimals; nav_per_share rounded half to even',
  per_share_scale: 8,
} as const;

/**
 * The submitted book, sealed at rest with its record and never published. Quantities, prices and amounts
 * are decimal strings in the book's currency. `salt` keys the sha256 of declared inputs in the public
 * evidence, so the references reveal nothing of the book.
 */
export interface Book {
  currency: string;
  holdings: Array<{
    label: string;
    quantity: string;
    price: string | null;
    /** When a declared price was observed (ISO); its freshness is judged from it. */
    price_as_of: string | null;
    price_source: { url: string; json_pointer: string; label: string } | null;
  }>;
  cash: Array<{ label: string; amount: string }>;
  liabilities: Array<{ label: string; amount: string }>;
  shares_outstanding: string | null;
  supply: { chain: string; chain_id: number; address: string; block_number: number | null } | null;
  freshness_seconds: number;
  salt: string;
}

/** One input's provenance in the signed record (references only). */
export interface EvidenceItem {
  input: string;
  source_kind: 'book' | 'declared' | 'https' | 'evm_rpc';
  label: string;
  retrieved_at: string;
  sha256: string | null;
  /** The sha256 is keyed with the record's sealed salt (declared inputs); unsalted: the sha256 of the bytes read. */
  salted: boolean;
}

export interface Figures {
  gross_assets: string;
  cash: string;
  liabilities: string;
  net_asset_value: string;
  shares_outstanding: string;
  nav_per_share: string;
}

export type NavStatus = 'VERIFIED' | 'STALE' | 'UNAVAILABLE';

/** What was observed for the book's inputs at this calculation: a price per holding, the share count. */
export interface Observed {
  prices: Array<{ value: string | null; evidence: EvidenceItem; observed_at: Date | null }>;
  shares: { value: string | null; evidence: EvidenceItem[] };
}

export const saltedSha256 = (salt: string, value: unknown) => `0x${createHash('sha256').update(Buffer.from(salt, 'hex')).update(canonicalize(value)).digest('hex')}`;

/** The declared part of the book (quantities, cash, liabilities, share count) as one salted reference. */
export function bookEvidence(book: Book, at: Date): EvidenceItem {
  const declared = { currency: book.currency, quantities: book.holdings.map((h) => h.quantity), cash: book.cash.map((c) => c.amount), liabilities: book.liabilities.map((l) => l.amount), shares_outstanding: book.shares_outstanding };
  return { input: 'book', source_kind: 'book', label: 'submitted book', retrieved_at: at.toISOString(), sha256: saltedSha256(book.salt, declared), salted: true };
}

/**
 * The figures of a book from what was observed: UNAVAILABLE with no figures when a price or the share count
 * is missing (never supplied, or its source could not be read); STALE when a price was observed longer ago
 * than the freshness window; else VERIFIED.
 */
export function computeNav(book: Book, obs: Observed, now: Date): { status: NavStatus; missing: string[]; stale: string[]; figures: Figures | null } {
  const missing: string[] = [];
  obs.prices.forEach((p, i) => {
    if (p.value === null) missing.push(`holdings[${i}].price`);
  });
  if (obs.shares.value === null) missing.push(book.supply ? 'supply' : 'shares_outstanding');
  if (missing.length) return { status: 'UNAVAILABLE', missing, stale: [], figures: null };
  const oldest = now.getTime() - book.freshness_seconds * 1000;
  const stale = obs.prices.flatMap((p, i) => (p.observed_at && p.observed_at.getTime() < oldest ? [`holdings[${i}].price`] : []));
  const gross = sum(book.holdings.map((h, i) => mul(parseDec(h.quantity), parseDec(obs.prices[i]!.value!))));
  const cash = sum(book.cash.map((c) => parseDec(c.amount)));
  const liabilities = sum(book.liabilities.map((l) => parseDec(l.amount)));
  const nav: Dec = sub(add(gross, cash), liabilities);
  const shares = parseDec(obs.shares.value!);
  if (isZero(shares) || isNegative(shares)) return { status: 'UNAVAILABLE', missing: [book.supply ? 'supply' : 'shares_outstanding'], stale: [], figures: null };
  return {
    status: stale.length ? 'STALE' : 'VERIFIED',
    missing: [],
    stale,
    figures: {
      gross_assets: decToString(gross),
      cash: decToString(add(cash, ZERO)),
      liabilities: decToString(liabilities),
      net_asset_value: decToString(nav),
      shares_outstanding: decToString(shares),
      nav_per_share: decToString(div(nav, shares, METHODOLOGY.per_share_scale)),
    },
  };
}
