/**
 * The rates of a run over its cases, each run `repeat` times (N):
 * - pass_rate: passed attempts / attempts;
 * - pass@N: the share of cases with at least one passing attempt out of N;
 * - pass^N: the share of cases whose N attempts all passed;
 * - wilson_lower: the lower bound of the Wilson score interval (95%, z = 1.96) of the pass rate over the
 *   attempts: what a drift monitor compares when it runs each case more than once, so that a handful of
 *   unlucky samples does not read as a drop, and more samples narrow the bound.
 */
export const WILSON_Z = 1.96;

export function wilsonLower(passed: number, n: number, z = WILSON_Z): number {
  if (n <= 0) return 0;
  const p = passed / n;
  const z2 = z * z;
  const centre = p + z2 / (2 * n);
  const margin = z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n));
  return Math.max(0, (centre - margin) / (1 + z2 / n));
}

export interface RunRates {
  attempts: number;
  passed_attempts: number;
  pass_rate: number;
  pass_at_n: number;
  pass_hat_n: number;
  wilson_lower: number;
}

/** `cases[i][r]`: whether attempt r of case i passed. */
export function rates(cases: boolean[][]): RunRates {
  const attempts = cases.reduce((s, c) => s + c.length, 0);
  const passed = cases.reduce((s, c) => s + c.filter(Boolean).length, 0);
  const n = cases.length || 1;
  return {
    attempts,
    passed_attempts: passed,
    pass_rate: attempts ? passed / attempts : 0,
    pass_at_n: cases.filter((c) => c.some(Boolean)).length / n,
    pass_hat_n: cases.filter((c) => c.length > 0 && c.every(Boolean)).length / n,
    wilson_lower: wilsonLower(passed, attempts),
  };
}
