import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConnectionNumbers } from './connection-numbers.ts';

describe('ConnectionNumbers', () => {
  it('numbers connections in order, across runs on one data dir even when the clock went back', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'conn-')), 'state', 'connection-number');
    const first = new ConnectionNumbers(file, 1_700_000_000_000);
    const a = [first.next(), first.next(), first.next()];
    expect(a).toEqual([1_700_000_000_000_001, 1_700_000_000_000_002, 1_700_000_000_000_003]);
    expect(readFileSync(file, 'utf8')).toBe('1700000000000003');
    // The next run's clock is a day behind: its numbers still come after the last run's.
    const again = new ConnectionNumbers(file, 1_700_000_000_000 - 86_400_000);
    expect(again.next()).toBe(1_700_000_000_000_004);
    // A clock ahead of what was kept starts from the clock.
    expect(new ConnectionNumbers(file, 1_800_000_000_000).next()).toBe(1_800_000_000_000_001);
  });

  it('ignores what it cannot believe in the file, and works without one', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'conn-')), 'connection-number');
    for (const junk of ['', 'abc', '-5', '1e300', String(Number.MAX_SAFE_INTEGER)]) {
      writeFileSync(file, junk);
      expect(new ConnectionNumbers(file, 1_000).next()).toBe(1_000_001);
    }
    const none = new ConnectionNumbers(null, 2_000);
    expect([none.next(), none.next()]).toEqual([2_000_001, 2_000_002]);
  });
});
