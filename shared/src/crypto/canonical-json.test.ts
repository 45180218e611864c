import { describe, expect, it } from 'vitest';
import referenceCanonicalize from 'canonicalize';
import { canonicalize } from './canonical-json.ts';

/** A double from its IEEE 754 bit pattern, as RFC 8785 Appendix B lists them. */
function f64(hex: string): number {
  const dv = new DataView(new ArrayBuffer(8));
  dv.setBigUint64(0, BigInt(`0x${hex}`));
  return dv.getFloat64(0);
}

describe('RFC 8785 examples', () => {
  it('sorts the RFC 3.2.3 keys by UTF-16 code units', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    const out = canonicalize(input);
    expect(out).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
    // The emoji (surrogate pair D83D DE00) sorts before U+FB33: code units, not code points.
    expect(out.indexOf('\ud83d\ude00')).toBeLessThan(out.indexOf('\ufb33'));
  });

  it('produces the RFC 3.2.4 example output (literals, numbers, string escaping)', () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",' +
        ' "literals": [null, true, false]}',
    );
    expect(canonicalize(input)).toBe(
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    );
  });

  it('serializes the RFC 8785 Appendix B number vectors', () => {
    const vectors: Array<[string, string]> = [
      ['0000000000000000', '0'],
      ['8000000000000000', '0'], // -0
      ['0000000000000001', '5e-324'],
      ['8000000000000001', '-5e-324'],
      ['7fefffffffffffff', '1.7976931348623157e+308'],
      ['ffefffffffffffff', '-1.7976931348623157e+308'],
      ['4340000000000000', '9007199254740992'],
      ['c340000000000000', '-9007199254740992'],
      ['4430000000000000', '295147905179352830000'],
      ['44b52d02c7e14af5', '9.999999999999997e+22'],
      ['44b52d02c7e14af6', '1e+23'],
      ['44b52d02c7e14af7', '1.0000000000000001e+23'],
      ['444b1ae4d6e2ef4e', '999999999999999700000'],
      ['444b1ae4d6e2ef4f', '999999999999999900000'],
      ['444b1ae4d6e2ef50', '1e+21'],
      ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
      ['3eb0c6f7a0b5ed8d', '0.000001'],
      ['41b3de4355555553', '333333333.3333332'],
      ['41b3de4355555554', '333333333.33333325'],
      ['41b3de4355555555', '333333333.3333333'],
      ['41b3de4355555556', '333333333.3333334'],
      ['41b3de4355555557', '333333333.33333343'],
      ['becbf647612f3696', '-0.0000033333333333333333'],
      ['43143ff3c1cb0959', '1424953923781206.2'],
    ];
    for (const [bits, expected] of vectors) expect(canonicalize(f64(bits)), bits).toBe(expected);
    // NaN and Infinity bit patterns from the same appendix are errors.
    expect(() => canonicalize(f64('7fffffffffffffff'))).toThrow(/non-finite/);
    expect(() => canonicalize(f64('7ff0000000000000'))).toThrow(/non-finite/);
  });
});

describe('numbers', () => {
  it.each<[number, string]>([
    [1e21, '1e+21'],
    [1e20, '100000000000000000000'],
    [1e-7, '1e-7'],
    [1e-6, '0.000001'],
    [0.000001, '0.000001'],
    [-0, '0'],
    [0, '0'],
    [333333333.33333329, '333333333.3333333'],
    [4.5, '4.5'],
    [4.50, '4.5'],
    [2e-3, '0.002'],
    [1e30, '1e+30'],
    [-1.5, '-1.5'],
    [100, '100'],
    [0.1 + 0.2, '0.30000000000000004'],
    [Number.MAX_SAFE_INTEGER, '9007199254740991'],
    [Number.MIN_VALUE, '5e-324'],
  ])('%s -> %s', (n, s) => {
    expect(canonicalize(n)).toBe(s);
    expect(canonicalize([n])).toBe(`[${s}]`);
    expect(canonicalize({ n })).toBe(`{"n":${s}}`);
  });

  it('-0 inside structures is 0', () => {
    expect(canonicalize({ a: -0, b: [-0, { c: -0 }] })).toBe('{"a":0,"b":[0,{"c":0}]}');
  });

  it('rejects NaN, Infinity and -Infinity anywhere', () => {
    for (const bad of [NaN, Infinity, -Infinity]) {
      expect(() => canonicalize(bad)).toThrow(/non-finite/);
      expect(() => canonicalize([1, bad])).toThrow(/non-finite/);
      expect(() => canonicalize({ a: { b: bad } })).toThrow(/non-finite/);
    }
  });

  it('rejects bigint anywhere', () => {
    expect(() => canonicalize(1n)).toThrow(/bigint/);
    expect(() => canonicalize([0n])).toThrow(/bigint/);
    expect(() => canonicalize({ a: { b: 10n ** 30n } })).toThrow(/bigint/);
  });
});

describe('strings', () => {
  it('escapes only what JSON requires, with lowercase \\u escapes', () => {
    expect(canonicalize('\u0000\u0001\u001f')).toBe('"\\u0000\\u0001\\u001f"');
    expect(canonicalize('\b\t\n\f\r')).toBe('"\\b\\t\\n\\f\\r"');
    expect(canonicalize('"\\')).toBe('"\\"\\\\"');
    expect(canonicalize('/')).toBe('"/"');
    expect(canonicalize('\u007f\u0080é€😀')).toBe('"\u007f\u0080é€😀"');
    expect(canonicalize('\u2028\u2029')).toBe('"\u2028\u2029"');
  });

  it('escapes characters in keys the same way as in values', () => {
    expect(canonicalize({ 'a"b': 1, 'c\nd': 2 })).toBe('{"a\\"b":1,"c\\nd":2}');
  });
});

describe('objects and arrays', () => {
  it('sorts keys by code unit, not by integer-likeness or locale', () => {
    // Object.keys puts integer-like keys first in numeric order ("9" before "10"); JCS wants "10" < "9".
    const input = { b: 1, a: 2, '10': 3, '9': 4, B: 5, _: 6, '': 7, aa: 8, 'a ': 9 };
    expect(canonicalize(input)).toBe('{"":7,"10":3,"9":4,"B":5,"_":6,"a":2,"a ":9,"aa":8,"b":1}');
  });

  it('is independent of insertion order', () => {
    const a = { x: 1, y: { p: [1, 2], q: null }, z: 'z' };
    const b = { z: 'z', y: { q: null, p: [1, 2] }, x: 1 };
    expect(canonicalize(a)).toBe(canonicalize(b));
    expect(canonicalize(a)).toBe('{"x":1,"y":{"p":[1,2],"q":null},"z":"z"}');
  });

  it('keeps array order and handles nesting', () => {
    const input = { outer: [3, 1, 2, [{ z: 1, a: [[], {}] }, 'x'], { k: { j: { i: true } } }] };
    expect(canonicalize(input)).toBe('{"outer":[3,1,2,[{"a":[[],{}],"z":1},"x"],{"k":{"j":{"i":true}}}]}');
  });

  it('has no whitespace', () => {
    expect(canonicalize({ a: [1, { b: 2 }], c: 'd e' })).toBe('{"a":[1,{"b":2}],"c":"d e"}');
  });

  it('drops undefined members, but renders undefined array elements as null (like JSON.stringify)', () => {
    expect(canonicalize({ a: undefined, b: 1, c: { d: undefined } })).toBe('{"b":1,"c":{}}');
    expect(canonicalize([undefined, 1])).toBe('[null,1]');
    expect(canonicalize({ only: undefined })).toBe('{}');
  });

  it('uses toJSON (e.g. Date)', () => {
    const d = new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6));
    expect(canonicalize({ at: d })).toBe('{"at":"2026-01-02T03:04:05.006Z"}');
    expect(canonicalize({ v: { toJSON: () => ({ b: 1, a: 2 }) } })).toBe('{"v":{"a":2,"b":1}}');
  });

  it('handles an own "__proto__" key from JSON.parse', () => {
    const input = JSON.parse('{"z":1,"__proto__":{"x":2}}');
    expect(canonicalize(input)).toBe('{"__proto__":{"x":2},"z":1}');
  });

  it('rejects values JSON cannot represent', () => {
    expect(() => canonicalize(undefined)).toThrow(/undefined/);
    expect(() => canonicalize(() => 1)).toThrow(/function/);
    expect(() => canonicalize(Symbol('s'))).toThrow(/symbol/);
    expect(() => canonicalize({ f: () => 1 })).toThrow(/function/);
  });

  // Holes render as null, as JSON.stringify does (Array.prototype.map would skip them and yield "[,]").
  it('renders array holes as null (sparse arrays)', () => {
    // eslint-disable-next-line no-sparse-arrays
    const sparse = [1, , 3];
    expect(canonicalize(sparse)).toBe('[1,null,3]');
    expect(canonicalize(new Array(2))).toBe('[null,null]');
  });
});

describe('round trip and cross-check with the canonicalize npm package', () => {
  // Deterministic PRNG so a failure is reproducible.
  function rng(seed: number) {
    let s = seed >>> 0;
    return () => {
      s = (s + 0x6d2b79f5) >>> 0;
      let t = s;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const CHARS = ['a', 'B', '1', '_', ' ', '\n', '"', '\\', '\u0000', '\u007f', 'é', '€', '\ufb33', '😀', '\u2028', '日'];

  function randomString(r: () => number): string {
    let s = '';
    const n = Math.floor(r() * 6);
    for (let i = 0; i < n; i++) s += CHARS[Math.floor(r() * CHARS.length)]!;
    return s;
  }
  function randomNumber(r: () => number): number {
    switch (Math.floor(r() * 5)) {
      case 0:
        return Math.floor(r() * 2000) - 1000;
      case 1:
        return (r() - 0.5) * 10 ** Math.floor(r() * 60 - 30);
      case 2:
        return f64(
          Array.from({ length: 8 }, () => Math.floor(r() * 256).toString(16).padStart(2, '0'))
            .join('')
            .replace(/^(.)/, (c) => (((parseInt(c, 16) & 0x7) | (r() < 0.5 ? 0 : 8)).toString(16))),
        );
      case 3:
        return -0;
      default:
        return r();
    }
  }
  function randomValue(r: () => number, depth: number): unknown {
    const k = Math.floor(r() * (depth > 3 ? 4 : 6));
    switch (k) {
      case 0:
        return null;
      case 1:
        return r() < 0.5;
      case 2: {
        const n = randomNumber(r);
        return Number.isFinite(n) ? n : 0;
      }
      case 3:
        return randomString(r);
      case 4:
        return Array.from({ length: Math.floor(r() * 4) }, () => randomValue(r, depth + 1));
      default: {
        const o: Record<string, unknown> = {};
        const n = Math.floor(r() * 5);
        for (let i = 0; i < n; i++) o[randomString(r)] = randomValue(r, depth + 1);
        return o;
      }
    }
  }

  /** The same document with every object's keys inserted in code-unit order (what canonicalize's JSON.stringify path takes). */
  function inOrder(v: unknown): unknown {
    if (Array.isArray(v)) return v.map(inOrder);
    if (v === null || typeof v !== 'object') return v;
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) o[k] = inOrder((v as Record<string, unknown>)[k]);
    return o;
  }

  it('writes a document whose keys are already in order the same bytes (2000 random documents)', () => {
    const r = rng(3339);
    let stringified = 0;
    for (let i = 0; i < 2000; i++) {
      const v = inOrder(randomValue(r, 0));
      const ours = canonicalize(v);
      expect(ours, `doc ${i}`).toBe(referenceCanonicalize(v));
      if (ours === JSON.stringify(v)) stringified++;
    }
    // Integer-like keys come first in Object.keys ("9" before "10"), so not every document can be in order.
    expect(stringified).toBeGreaterThan(1500);
  });

  it('does not take JSON.stringify for what it would write differently', () => {
    // Boxed primitives and other non-plain objects are objects to JCS (their own keys), not their values.
    for (const v of [{ a: Object(1) }, { a: Object('xy') }, { a: new Map([['k', 1]]) }, { a: new Uint8Array([5, 6]) }, [Object(true)]]) {
      expect(canonicalize(v)).toBe(referenceCanonicalize(v));
    }
    expect(canonicalize({ a: new Uint8Array([5, 6]) })).toBe('{"a":{"0":5,"1":6}}');
    // A function member JSON.stringify would drop, and a non-finite number it would write as null, are refused.
    expect(() => canonicalize({ a: 1, b: () => 1 })).toThrow(/function/);
    expect(() => canonicalize({ a: [1, NaN] })).toThrow(/non-finite/);
    expect(() => canonicalize({ a: { b: 1n } })).toThrow(/bigint/);
  });

  it('agrees with canonicalize@2 and JSON.parse round-trips, over 2000 random documents', () => {
    const r = rng(8785);
    for (let i = 0; i < 2000; i++) {
      const v = randomValue(r, 0);
      const ours = canonicalize(v);
      expect(ours, `doc ${i}`).toBe(referenceCanonicalize(v));
      const back = JSON.parse(ours) as unknown;
      expect(canonicalize(back)).toBe(ours); // idempotent through a parse
    }
  });
});
