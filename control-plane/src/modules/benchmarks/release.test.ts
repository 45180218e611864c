import { describe, expect, it } from 'vitest';
import { band } from './cohorts.ts';
import { bucketOf, computeRelease, membershipChange, pct, positionOf, weightsOf, type Weights } from './release.ts';

const CLASSES = ['equity', 'bonds', 'cash', 'crypto'];
const w = (equity: number, bonds: number, cash: number, crypto: number): Weights => ({ equity: equity * 10_000, bonds: bonds * 10_000, cash: cash * 10_000, crypto: crypto * 10_000 });

describe('benchmark releases', () => {
  it('weights holdings exactly by class, in parts per million', () => {
    expect(weightsOf([{ asset_class: 'equity', value: '600' }, { asset_class: 'bonds', value: '300.5' }, { asset_class: 'equity', value: '99.5' }], CLASSES)).toEqual({ equity: 699_500, bonds: 300_500, cash: 0, crypto: 0 });
    expect(pct(123_456)).toBe('12.3456');
    expect(bucketOf(0).label).toBe('0-5%');
    expect(bucketOf(1_000_000).label).toBe('95-100%');
    expect(bucketOf(250_000).label).toBe('25-30%');
  });

  it('bands counts without telling apart anything below k', () => {
    expect([0, 4, 5, 9, 10, 24, 25, 1000, 5000].map((n) => band(n, 5))).toEqual(['fewer than 5', 'fewer than 5', '5-9', '5-9', '10-24', '10-24', '25-49', '1000 or more', '1000 or more']);
    expect(band(12, 12)).toBe('12-24');
  });

  it('suppresses a class held by fewer than k, and a complementary one so the 100% total recovers neither', () => {
    const members = [w(60, 30, 10, 0), w(50, 30, 20, 0), w(70, 20, 10, 0), w(40, 40, 10, 10), w(55, 25, 20, 0)];
    const r = computeRelease(members, CLASSES, 5);
    // crypto: one holder (primary); cash has the smallest mean (14%) of the classes all five hold (complementary).
    expect(r.map((f) => [f.asset_class, f.status])).toEqual([['equity', 'released'], ['bonds', 'released'], ['cash', 'suppressed'], ['crypto', 'suppressed']]);
    expect(r[0]).toMatchObject({ mean_weight_bucket: '55-60%', holders_band: '5-9' });
    expect(r[1]).toMatchObject({ mean_weight_bucket: '25-30%' });
    // With two cells suppressed, the total gives only their sum: 100 - 55 - 29 = 16, never crypto's 2 alone.
  });

  it('releases a class nobody holds as none, and suppresses nothing when every held class has k holders', () => {
    const members = Array.from({ length: 6 }, (_, i) => w(50 + i, 50 - i, 0, 0));
    const r = computeRelease(members, CLASSES, 5);
    expect(r.map((f) => f.status)).toEqual(['released', 'released', 'released', 'released']);
    expect(r[2]).toMatchObject({ mean_weight_bucket: '0-5%', holders_band: 'none' });
    expect(() => computeRelease(members.slice(0, 4), CLASSES, 5)).toThrow();
  });

  it('counts membership changes and places a weight against a bucket', () => {
    expect(membershipChange(['a', 'b', 'c'], ['b', 'c', 'd', 'e'])).toBe(3);
    expect(positionOf(120_000, '10-15%')).toBe('within');
    expect(positionOf(90_000, '10-15%')).toBe('below');
    expect(positionOf(150_000, '10-15%')).toBe('above');
    expect(positionOf(1_000_000, '95-100%')).toBe('within');
  });
});
