import { describe, expect, it } from 'vitest';
import { costOf } from './video-jobs.ts';

describe('costOf', () => {
  it('rounds up to a whole micro-USD, without the one binary floating point adds', () => {
    expect(0.14 * 10_000).toBeGreaterThan(1400); // 1400.0000000000002
    expect(costOf(0.14, 10_000)).toBe(1400);
    expect(costOf(4, 1_000)).toBe(4_000);
    expect(costOf(4.0001, 1_000)).toBe(4_001);
    expect(costOf(0.5, 3)).toBe(2);
  });
});
