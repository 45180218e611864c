import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { RateLimiter, clientKey } from './assistant.ts';

const limited = (l: RateLimiter, key: string) => {
  try {
    l.take(key);
    return false;
  } catch {
    return true;
  }
};

describe('RateLimiter', () => {
  it('holds at most maxKeys windows however many addresses call within one window; stale ones go as time moves', () => {
    const clock = new ManualClock();
    const l = new RateLimiter(2, 60_000, clock, 1_000);
    for (let i = 0; i < 5_000; i++) l.take(`198.51.${i >> 8}.${i & 255}`);
    expect(l.size).toBe(1_000);
    clock.advance(60_000);
    l.take('203.0.113.1');
    expect(l.size).toBe(1);
  });

  it('a key whose window renewed is kept past older windows, its count intact', () => {
    const clock = new ManualClock();
    const l = new RateLimiter(2, 60_000, clock);
    l.take('a');
    clock.advance(30_000);
    l.take('b');
    clock.advance(30_000);
    l.take('a'); // a's second window: now the newest
    l.take('a');
    clock.advance(30_000); // b's window ended, a's has not
    expect(limited(l, 'a')).toBe(true);
    expect(l.size).toBe(1);
    expect(limited(l, 'b')).toBe(false);
  });
});

describe('clientKey', () => {
  it('an IPv4 address (also IPv4-mapped) as is; an IPv6 address by its /64', () => {
    expect(clientKey('203.0.113.7')).toBe('203.0.113.7');
    expect(clientKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    for (const ip of ['2001:db8:a:b::1', '2001:DB8:A:B:ffff:1:2:3', '2001:0db8:000a:000b::', '2001:db8:a:b:1:2:1.2.3.4', '2001:db8:a:b:0:0:0:1%eth0']) {
      expect(clientKey(ip), ip).toBe('2001:db8:a:b::/64');
    }
    expect(clientKey('::1')).toBe('0:0:0:0::/64');
    expect(clientKey('2001:db8::')).toBe('2001:db8:0:0::/64');
    expect(clientKey('1::2:3:4:5:1.2.3.4')).toBe('1:0:2:3::/64');
  });
});
