import { describe, expect, it } from 'vitest';
import { rates, wilsonLower } from './stats.ts';

describe('run rates', () => {
  it('pass rate, pass@N and pass^N over cases run N times', () => {
    const r = rates([
      [true, true, true],
      [true, false, false],
      [false, false, false],
    ]);
    expect(r).toMatchObject({ attempts: 9, passed_attempts: 4 });
    expect(r.pass_rate).toBeCloseTo(4 / 9, 12);
    expect(r.pass_at_n).toBeCloseTo(2 / 3, 12);
    expect(r.pass_hat_n).toBeCloseTo(1 / 3, 12);
  });

  it('the Wilson lower bound: known values, tighter with more samples, never above the rate', () => {
    expect(wilsonLower(0, 10)).toBe(0);
    expect(wilsonLower(10, 10)).toBeCloseTo(0.7225, 4); // 1 / (1 + z^2/n) with z = 1.96, n = 10
    expect(wilsonLower(5, 10)).toBeCloseTo(0.2366, 4);
    expect(wilsonLower(50, 100)).toBeGreaterThan(wilsonLower(5, 10));
    for (const [k, n] of [[1, 3], [7, 9], [99, 100]] as const) expect(wilsonLower(k, n)).toBeLessThan(k / n);
    expect(wilsonLower(0, 0)).toBe(0);
  });
});
