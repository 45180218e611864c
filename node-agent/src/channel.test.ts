import { describe, expect, it } from 'vitest';
import { BACKOFF_CAP_MS, BACKOFF_FIRST_MS, backoffMs } from './channel.ts';

const top = () => 1; // the jitter's upper end: the ceiling itself
const bottom = () => 0; // its lower end: half the ceiling

describe('reconnect backoff', () => {
  it('starts at 0.5 s and doubles per attempt', () => {
    expect(BACKOFF_FIRST_MS).toBe(500);
    expect([0, 1, 2, 3, 4, 5].map((a) => backoffMs(a, top))).toEqual([500, 1000, 2000, 4000, 8000, 16_000]);
  });

  it('is capped at 30 s however many attempts failed', () => {
    expect(BACKOFF_CAP_MS).toBe(30_000);
    expect(backoffMs(6, top)).toBe(30_000); // 32 s uncapped
    expect(backoffMs(50, top)).toBe(30_000);
    expect(backoffMs(10_000, top)).toBe(30_000); // 2 ** 10000 is Infinity: still capped
    expect(backoffMs(50, bottom)).toBe(15_000);
  });

  it('jitters within the upper half of the ceiling', () => {
    expect(backoffMs(0, bottom)).toBe(250);
    expect(backoffMs(0, () => 0.5)).toBe(375);
    expect(backoffMs(3, bottom)).toBe(2000);
    for (let attempt = 0; attempt < 12; attempt++) {
      const ceiling = Math.min(30_000, 500 * 2 ** attempt);
      for (let i = 0; i < 50; i++) {
        const d = backoffMs(attempt);
        expect(d).toBeGreaterThanOrEqual(ceiling / 2);
        expect(d).toBeLessThanOrEqual(ceiling);
      }
    }
  });
});
