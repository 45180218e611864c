import { describe, expect, it } from 'vitest';
import { computeNav, type Book, type Observed } from './compute.ts';

const book = (over: Partial<Book> = {}): Book => ({
  currency: 'USD',
  holdings: [
    { label: 'a', quantity: '3', price: '1.1', price_as_of: '2026-01-01T00:00:00.000Z', price_source: null },
    { label: 'b', quantity: '0.5', price: null, price_as_of: null, price_source: { url: 'https://x.example', json_pointer: '', label: 'q' } },
  ],
  cash: [{ label: 'c', amount: '0.01' }],
  liabilities: [{ label: 'l', amount: '1' }],
  shares_outstanding: '3',
  supply: null,
  freshness_seconds: 3600,
  salt: '00'.repeat(32),
  ...over,
});
const ev = { input: 'x', source_kind: 'declared' as const, label: 'x', retrieved_at: '', sha256: null, salted: false };
const obs = (prices: Array<[string | null, string | null]>, shares: string | null): Observed => ({
  prices: prices.map(([v, at]) => ({ value: v, observed_at: at ? new Date(at) : null, evidence: ev })),
  shares: { value: shares, evidence: [] },
});

describe('NAV computation', () => {
  it('sums exactly and rounds the per-share figure half to even at 8 places', () => {
    const r = computeNav(book(), obs([['1.1', '2026-01-01T00:00:00Z'], ['0.2', '2026-01-01T00:30:00Z']], '3'), new Date('2026-01-01T00:45:00Z'));
    // 3 x 1.1 + 0.5 x 0.2 + 0.01 - 1 = 2.41; / 3 = 0.80333333(3)
    expect(r).toEqual({ status: 'VERIFIED', missing: [], stale: [], figures: { gross_assets: '3.4', cash: '0.01', liabilities: '1', net_asset_value: '2.41', shares_outstanding: '3', nav_per_share: '0.80333333' } });
  });

  it('is UNAVAILABLE with no figures when a price or the share count is missing', () => {
    expect(computeNav(book(), obs([['1.1', null], [null, null]], null), new Date())).toEqual({ status: 'UNAVAILABLE', missing: ['holdings[1].price', 'shares_outstanding'], stale: [], figures: null });
    const onChain = book({ shares_outstanding: null, supply: { chain: 'base', chain_id: 8453, address: '0x', block_number: null } });
    expect(computeNav(onChain, obs([['1', null], ['1', null]], '0'), new Date()).missing).toEqual(['supply']);
  });

  it('is STALE when a price was observed before the freshness window', () => {
    const r = computeNav(book(), obs([['1.1', '2026-01-01T00:00:00Z'], ['0.2', '2026-01-01T01:30:00Z']], '3'), new Date('2026-01-01T01:30:00.001Z'));
    expect(r.status).toBe('STALE');
    expect(r.stale).toEqual(['holdings[0].price']);
    expect(r.figures?.net_asset_value).toBe('2.41');
  });
});
