import { describe, expect, it } from 'vitest';
import { BlindBook, bestCounterparty, matchTerms, type Candidate, type Terms } from './terms.ts';

const t = (side: 'buy' | 'sell', limit: number, size = 10, asset = 'ACME'): Terms => ({ asset_id: asset, side, size, limit_price_micro_usd: limit, settlement_address: `0x${side === 'buy' ? 'b' : 'a'}${'0'.repeat(39)}` });
const c = (id: string, seq: number, terms: Terms, account = 'acct_other'): Candidate => ({ id, seq, account_id: account, terms });

describe('the dark pool crossing rule', () => {
  it('crosses at or through the limits, best limit for the asker first, then oldest', () => {
    const buy = t('buy', 100);
    expect(bestCounterparty(buy, 'acct_me', [c('s1', 1, t('sell', 101))])).toBeNull();
    expect(bestCounterparty(buy, 'acct_me', [c('s1', 1, t('sell', 100))])?.id).toBe('s1');
    expect(bestCounterparty(buy, 'acct_me', [c('s1', 1, t('sell', 99)), c('s2', 2, t('sell', 95)), c('s3', 3, t('sell', 95))])?.id).toBe('s2');
    expect(bestCounterparty(t('sell', 90), 'acct_me', [c('b1', 5, t('buy', 91)), c('b2', 6, t('buy', 99)), c('b3', 4, t('buy', 99))])?.id).toBe('b3');
  });

  it('never matches the same account, the same side or another asset', () => {
    const buy = t('buy', 100);
    expect(bestCounterparty(buy, 'acct_me', [c('s1', 1, t('sell', 90), 'acct_me'), c('b1', 2, t('buy', 90)), c('x', 3, t('sell', 90, 10, 'OTHER'))])).toBeNull();
  });

  it('prices at the midpoint rounded down, sizes at the smaller size', () => {
    expect(matchTerms(t('buy', 101, 7), t('sell', 98, 5))).toMatchObject({ price_micro_usd: 99, size: 5, amount_micro_usd: 495 });
  });

  it('keys the book by asset and side under the seal key, never the asset in clear', () => {
    const a = new BlindBook(new Uint8Array(32).fill(1));
    const b = new BlindBook(new Uint8Array(32).fill(2));
    expect(a.book('ACME', 'buy')).not.toBe(a.book('ACME', 'sell'));
    expect(a.book('ACME', 'buy')).not.toBe(b.book('ACME', 'buy'));
    expect(a.book('ACME', 'buy')).toMatch(/^[0-9a-f]{64}$/);
    expect(a.asset('ACME')).not.toContain('ACME');
  });
});
