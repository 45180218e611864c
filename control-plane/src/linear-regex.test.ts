import { describe, expect, it } from 'vitest';
import { RE2JS } from 're2js';
import { linearRegex, translateEscapes } from './linear-regex.ts';

/**
 * How many times the engine reads the input to answer whether `source` matches `text`: the text is handed to
 * RE2JS as UTF-8 bytes in an array whose element reads are counted (a step count, independent of the machine's
 * speed).
 */
function reads(source: string, text: string): number {
  const bytes = [...new TextEncoder().encode(text)];
  let count = 0;
  const counted = new Proxy(bytes, {
    get(target, key, receiver) {
      if (typeof key === 'string' && /^\d+$/.test(key)) count++;
      return Reflect.get(target, key, receiver);
    },
  });
  RE2JS.compile(translateEscapes(source)).matcher(counted).find();
  return count;
}

describe('linear-time regular expressions (RE2JS)', () => {
  it('reads the input a bounded number of times per character on patterns that backtrack catastrophically elsewhere', () => {
    const sizes = [1_000, 2_000, 4_000, 8_000, 16_000];
    for (const [pattern, unit, tail] of [
      ['(a+)+$', 'a', '!'],
      ['(a|aa)+b', 'a', '!'],
      ['(\\w+\\s?)*x', 'ab ', '!'],
      ['^(([a-z])+.)+[A-Z]([a-z])+$', 'aa', '!'],
    ] as const) {
      const perChar = sizes.map((n) => {
        const text = unit.repeat(Math.ceil(n / unit.length)).slice(0, n) + tail;
        return reads(pattern, text) / text.length;
      });
      // Linear: the reads per character stay the same whatever the length (a backtracking engine's double, or
      // worse, with each doubling of the text).
      expect(Math.max(...perChar) / Math.min(...perChar), `${pattern}: ${perChar.map((r) => r.toFixed(2)).join(' ')}`).toBeLessThan(1.25);
      expect(Math.max(...perChar), pattern).toBeLessThan(20);
    }
    // The same patterns in the product's wrapper answer at all (no match here) on a text V8's RegExp never finishes.
    expect(linearRegex('(a+)+$').test(`${'a'.repeat(50_000)}!`)).toBe(false);
    expect(linearRegex('(a|aa)+b').test(`${'a'.repeat(50_000)}!`)).toBe(false);
  });

  it('finds every match at its UTF-16 offset, with the JavaScript flags', () => {
    const text = '😀é TKT-1234 tkt-5678 😀 TKT-9';
    expect(linearRegex('TKT-[0-9]{4}', 'g').matches(text)).toEqual([{ index: 4, text: 'TKT-1234' }]);
    expect(linearRegex('tkt-[0-9]{4}', 'i').matches(text).map((m) => [m.index, text.slice(m.index, m.index + m.text.length)])).toEqual([
      [4, 'TKT-1234'],
      [13, 'tkt-5678'],
    ]);
    expect(linearRegex('^b$', 'm').test('a\nb\nc')).toBe(true);
    expect(linearRegex('^b$').test('a\nb\nc')).toBe(false);
    expect(linearRegex('a.b', 's').test('a\nb')).toBe(true);
    expect(linearRegex('x*').matches('abc')).toEqual([]); // empty matches are skipped
    expect(() => linearRegex('a', 'y')).toThrow(/unknown flag "y"/);
  });

  it('refuses what only a backtracking engine runs', () => {
    for (const p of ['(a)\\1', '(?=a)b', '(?<!a)b', '[a-']) expect(() => linearRegex(p), p).toThrow();
  });

  it("takes JavaScript's \\u, \\u{} and \\c escapes as the characters they name, and leaves \\\\u and \\Q...\\E alone", () => {
    expect(linearRegex('caf\\u00e9').test('café')).toBe(true);
    expect(linearRegex('\\uD83D\\uDE00').matches('x😀')).toEqual([{ index: 1, text: '😀' }]);
    expect(linearRegex('\\u{1F600}').test('😀')).toBe(true);
    expect(linearRegex('a\\cJb').test('a\nb')).toBe(true);
    expect(translateEscapes('\\\\u0041')).toBe('\\\\u0041');
    expect(linearRegex('\\\\u0041').test('\\u0041')).toBe(true);
    expect(translateEscapes('\\Q\\u0041\\E\\u0041')).toBe('\\Q\\u0041\\E\\x{41}');
  });
});
