import { describe, expect, it } from 'vitest';
import { Backoff, BACKOFF_CAP_MS, BACKOFF_FIRST_MS, BACKOFF_FLOOR_MS, backoffMs } from './channel.ts';

const top = () => 1; // the jitter's upper end: the ceiling itself
const bottom = () => 0; // its lower end: the floor

describe('reconnect backoff', () => {
  it('has a ceiling that starts at 0.5 s and doubles per attempt', () => {
    expect(BACKOFF_FIRST_MS).toBe(500);
    expect([0, 1, 2, 3, 4, 5].map((a) => backoffMs(a, top))).toEqual([500, 1000, 2000, 4000, 8000, 16_000]);
  });

  it('is capped at 30 s however many attempts failed', () => {
    expect(BACKOFF_CAP_MS).toBe(30_000);
    expect(backoffMs(6, top)).toBe(30_000); // 32 s uncapped
    expect(backoffMs(50, top)).toBe(30_000);
    expect(backoffMs(10_000, top)).toBe(30_000); // 2 ** 10000 is Infinity: still capped
  });

  it('jitters over the whole window, never below the floor', () => {
    expect(BACKOFF_FLOOR_MS).toBe(100);
    expect(backoffMs(0, bottom)).toBe(100);
    expect(backoffMs(50, bottom)).toBe(100);
    expect(backoffMs(0, () => 0.5)).toBe(300);
    expect(backoffMs(3, () => 0.5)).toBe(2050);
    for (let attempt = 0; attempt < 12; attempt++) {
      const ceiling = Math.min(30_000, 500 * 2 ** attempt);
      for (let i = 0; i < 50; i++) {
        const d = backoffMs(attempt);
        expect(d).toBeGreaterThanOrEqual(100);
        expect(d).toBeLessThanOrEqual(ceiling);
      }
    }
  });

  it('spreads agents dropped together over the window instead of its upper half', () => {
    // 1,000 agents on their fourth attempt (ceiling 4 s): a quarter of them come back in the first second.
    const waits = Array.from({ length: 1000 }, () => backoffMs(3));
    const early = waits.filter((w) => w < 1000).length;
    expect(early).toBeGreaterThan(150);
    expect(early).toBeLessThan(350);
  });
});

describe('Backoff', () => {
  it('counts attempts across connections that open and drop, until a hello is answered', () => {
    const b = new Backoff(top);
    // Sockets that open and close again (a control plane that accepts and drops) do not start the count over.
    expect([b.next(), b.next(), b.next(), b.next()]).toEqual([500, 1000, 2000, 4000]);
    b.reset(); // a hello answered: the node is back
    expect(b.next()).toBe(500);
  });
});
