import { RE2JS } from 're2js';

/**
 * Regular expressions a caller supplies (blocklist patterns, eval assertions, JSON Schema `pattern`s), run by
 * RE2JS: a pure-JavaScript port of RE2, so matching time is linear in the text whatever the pattern (no
 * backtracking; backreferences and lookaround do not compile), and the install needs no compiler.
 *
 * The syntax is RE2's (`(?i)` and the other inline flags, `\pL`, `[[:alpha:]]`, `\Q...\E`), plus the
 * JavaScript escapes people paste from JSON Schemas and JavaScript sources: `\uXXXX` (a surrogate pair of them
 * is one character), `\u{X...}` and `\cX`. Match positions are UTF-16 offsets into the JavaScript string.
 */
export interface LinearRegex {
  /** The pattern as given. */
  readonly source: string;
  /** Whether it matches anywhere in `text`. */
  test(text: string): boolean;
  /** Every match, left to right, none overlapping; empty matches skipped. */
  matches(text: string): Array<{ index: number; text: string }>;
}

/** JavaScript flag letters and RE2JS's: g (every match) is what `matches` does anyway; u is always on. */
const FLAGS: Record<string, number> = { i: RE2JS.CASE_INSENSITIVE, m: RE2JS.MULTILINE, s: RE2JS.DOTALL, g: 0, u: 0 };

/** Compiles `source` with JavaScript-style `flags` (i, m, s; g and u accepted); throws when it does not compile. */
export function linearRegex(source: string, flags = ''): LinearRegex {
  let bits = 0;
  for (const f of flags) {
    const bit = FLAGS[f];
    if (bit === undefined) throw new SyntaxError(`unknown flag "${f}" (i, m and s are supported)`);
    bits |= bit;
  }
  const re = RE2JS.compile(translateEscapes(source), bits);
  return {
    source,
    test: (text) => re.test(text),
    matches(text) {
      const out: Array<{ index: number; text: string }> = [];
      for (const m of re.matchAll(text)) if (m[0].length > 0) out.push({ index: m.index ?? 0, text: m[0] });
      return out;
    },
  };
}

const hex = (cp: number) => `\\x{${cp.toString(16)}}`;

/** Rewrites the JavaScript-only escapes into RE2's `\x{...}`, leaving everything else (and `\Q...\E` text) as it is. */
export function translateEscapes(src: string): string {
  let out = '';
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c !== '\\') {
      out += c;
      i++;
      continue;
    }
    const next = src[i + 1];
    if (next === 'Q') {
      const end = src.indexOf('\\E', i + 2);
      const stop = end < 0 ? src.length : end + 2;
      out += src.slice(i, stop);
      i = stop;
      continue;
    }
    if (next === 'u') {
      const braced = /^\\u\{([0-9a-fA-F]{1,6})\}/.exec(src.slice(i));
      if (braced) {
        out += hex(parseInt(braced[1]!, 16));
        i += braced[0].length;
        continue;
      }
      const four = /^\\u([0-9a-fA-F]{4})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?/.exec(src.slice(i));
      if (four) {
        const hi = parseInt(four[1]!, 16);
        const lo = four[2] ? parseInt(four[2], 16) : -1;
        const pair = hi >= 0xd800 && hi <= 0xdbff && lo >= 0;
        out += pair ? hex(0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)) : hex(hi) + (lo >= 0 ? hex(lo) : '');
        i += four[0].length;
        continue;
      }
    }
    if (next === 'c' && /[a-zA-Z]/.test(src[i + 2] ?? '')) {
      out += hex(src.charCodeAt(i + 2) % 32);
      i += 3;
      continue;
    }
    out += src.slice(i, i + 2);
    i += 2;
  }
  return out;
}
