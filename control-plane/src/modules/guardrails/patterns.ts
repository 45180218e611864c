import { linearRegex, type LinearRegex } from '../../linear-regex.ts';

/**
 * Patterns a caller supplies (blocklist `patterns`) run in RE2 (RE2JS, see linear-regex.ts), whose matching time is linear in the text, and
 * are checked before they are stored:
 * - RE2 must compile them: backreferences and lookaround, which only a backtracking engine can run, are refused;
 * - no repetition of an unbounded expression (`(a+)+`, `(\w+\s?)*`) and no unbounded repetition of a
 *   variable-length one (`(a|aa)+`, `(x?y?)*`): in a backtracking engine such a pattern backtracks
 *   catastrophically, so it is refused even though RE2 would run it safely (a rule set may be exported to
 *   engines that backtrack);
 * - a bounded match length, at most MAX_PATTERN_MATCH characters (`\w{1,40}`, not `\w+`): a stream holds back
 *   the longest match a pattern can make, so it needs a bound;
 * - no empty match (it would match between every two characters).
 */
export const MAX_PATTERN_LENGTH = 200;
export const MAX_PATTERN_MATCH = 128;

export class PatternError extends Error {}

interface Shape {
  min: number;
  max: number;
  /** Holds a repetition whose count varies (min != max). */
  variable: boolean;
}

/** Shape analysis of an RE2 pattern: the fewest and most characters (code points) it matches, and nesting. */
export function analyzePattern(src: string): Shape {
  let i = 0;
  const fail = (msg: string): never => {
    throw new PatternError(`${msg} (at offset ${i})`);
  };

  const alternation = (): Shape => {
    let s = sequence();
    while (src[i] === '|') {
      i++;
      const t = sequence();
      s = { min: Math.min(s.min, t.min), max: Math.max(s.max, t.max), variable: s.variable || t.variable || s.min !== t.min || s.max !== t.max };
    }
    return s;
  };

  const sequence = (): Shape => {
    const s: Shape = { min: 0, max: 0, variable: false };
    while (i < src.length && src[i] !== '|' && src[i] !== ')') {
      const a = quantified();
      s.min += a.min;
      s.max += a.max;
      s.variable ||= a.variable;
    }
    return s;
  };

  const quantified = (): Shape => {
    const a = atom();
    for (;;) {
      const q = quantifier();
      if (!q) return a;
      if (src[i] === '?') i++; // lazy: the same lengths
      else if (src[i] === '+') fail('possessive quantifiers are not supported');
      if (q.max > 1 && a.max === Infinity) fail('nested repetition of an unbounded expression (such as (a+)+) backtracks catastrophically in backtracking engines');
      if (q.max === Infinity && a.variable) fail('unbounded repetition of a variable-length expression (such as (a|aa)+ or (a{1,3})*) backtracks catastrophically in backtracking engines');
      a.min *= q.min;
      a.max = a.max === 0 ? 0 : q.max === Infinity ? Infinity : a.max * q.max;
      a.variable ||= q.min !== q.max;
    }
  };

  const quantifier = (): { min: number; max: number } | null => {
    const c = src[i];
    if (c === '*') return i++, { min: 0, max: Infinity };
    if (c === '+') return i++, { min: 1, max: Infinity };
    if (c === '?') return i++, { min: 0, max: 1 };
    if (c === '{') {
      const m = /^\{(\d{1,4})(,(\d{0,4}))?\}/.exec(src.slice(i));
      if (!m) return null; // a literal brace
      i += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3]);
      if (max < min) fail('a repetition {n,m} needs n <= m');
      if (min > 1000 || (max !== Infinity && max > 1000)) fail('a repetition count above 1000');
      return { min, max };
    }
    return null;
  };

  const one = (): Shape => ({ min: 1, max: 1, variable: false });
  const none = (): Shape => ({ min: 0, max: 0, variable: false });

  const atom = (): Shape => {
    const c = src[i];
    if (c === '(') {
      i++;
      if (src[i] === '?') {
        const rest = src.slice(i);
        if (/^\?(?:=|!|<=|<!)/.test(rest)) fail('lookaround is not supported (RE2 runs in linear time and has none)');
        const named = /^\?P?<[A-Za-z_][A-Za-z0-9_]*>/.exec(rest);
        const flags = /^\?[imsU-]*(:|\))/.exec(rest);
        if (named) i += named[0].length;
        else if (flags) {
          i += flags[0].length;
          if (flags[1] === ')') return none();
        } else fail('an unknown group syntax');
      }
      const s = alternation();
      if (src[i] !== ')') fail('an unclosed group');
      i++;
      return s;
    }
    if (c === '[') {
      i++;
      if (src[i] === '^') i++;
      if (src[i] === ']') i++;
      while (i < src.length && src[i] !== ']') {
        if (src[i] === '\\') i += 2;
        else if (src.startsWith('[:', i)) {
          const end = src.indexOf(':]', i + 2);
          if (end < 0) fail('an unclosed character class');
          i = end + 2;
        } else i++;
      }
      if (src[i] !== ']') fail('an unclosed character class');
      i++;
      return one();
    }
    if (c === '\\') {
      const e = src[i + 1];
      if (e === undefined) fail('a trailing backslash');
      if (/[1-9]/.test(e!)) fail('backreferences are not supported (RE2 runs in linear time and has none)');
      if ('bBAz'.includes(e!)) return (i += 2), none();
      if (e === 'Q') {
        const end = src.indexOf('\\E', i + 2);
        const lit = end < 0 ? src.slice(i + 2) : src.slice(i + 2, end);
        i = end < 0 ? src.length : end + 2;
        return { min: [...lit].length, max: [...lit].length, variable: false };
      }
      if ((e === 'p' || e === 'P') && src[i + 2] === '{') {
        const end = src.indexOf('}', i);
        if (end < 0) fail('an unclosed \\p{...}');
        i = end + 1;
        return one();
      }
      if (e === 'x' && src[i + 2] === '{') {
        const end = src.indexOf('}', i);
        if (end < 0) fail('an unclosed \\x{...}');
        i = end + 1;
        return one();
      }
      if (e === 'x') return (i += 4), one();
      i += (e === 'p' || e === 'P') ? 3 : 2;
      return one();
    }
    if (c === '^' || c === '$') return i++, none();
    if (c === ')') fail('an unmatched )');
    if (c === '*' || c === '+' || c === '?') fail('a repetition with nothing to repeat');
    i += src.codePointAt(i)! > 0xffff ? 2 : 1;
    return one();
  };

  const s = alternation();
  if (i < src.length) fail('an unmatched )');
  return s;
}

/** Why a pattern is refused, or null when it may be stored. */
export function patternProblem(src: string): string | null {
  if (src.length === 0) return 'an empty pattern';
  if (src.length > MAX_PATTERN_LENGTH) return `longer than ${MAX_PATTERN_LENGTH} characters`;
  let shape: Shape;
  try {
    shape = analyzePattern(src);
  } catch (e) {
    return e instanceof PatternError ? e.message : 'not a pattern';
  }
  try {
    linearRegex(src);
  } catch (e) {
    return `RE2 cannot compile it: ${(e as Error).message}`;
  }
  if (shape.min === 0) return 'it can match the empty string';
  if (shape.max === Infinity) return `its match length is unbounded; bound it (\\w{1,40} rather than \\w+), at most ${MAX_PATTERN_MATCH} characters`;
  if (shape.max > MAX_PATTERN_MATCH) return `it can match up to ${shape.max} characters; at most ${MAX_PATTERN_MATCH}`;
  return null;
}

/** The compiled pattern (RE2) and the most UTF-16 units one match covers. */
export function compilePattern(src: string): { re: LinearRegex; maxSpan: number } {
  const problem = patternProblem(src);
  if (problem) throw new PatternError(problem);
  return { re: linearRegex(src), maxSpan: 2 * analyzePattern(src).max };
}

/**
 * A run of literal characters every match of the pattern contains (the longest at its top level, ASCII only),
 * and whether it is compared ignoring case (a leading `(?i)`): a text without it cannot match, so RE2 is not
 * asked. Null when the pattern has no such run (a top-level alternation, for one).
 */
export function requiredLiteral(src: string): { literal: string; ignoreCase: boolean } | null {
  let i = 0;
  const ignoreCase = src.startsWith('(?i)');
  if (ignoreCase) i = 4;
  if (/\(\?[a-zA-Z-]*i/.test(src.slice(i))) return null; // case rules change inside
  let best = '';
  let cur = '';
  const flush = () => {
    if (cur.length > best.length) best = cur;
    cur = '';
  };
  const skipQuantifier = () => {
    const m = /^(?:[*+?]|\{\d+(?:,\d*)?\})\??/.exec(src.slice(i));
    if (m) i += m[0].length;
  };
  const skipBalanced = (open: string, close: string) => {
    let depth = 0;
    while (i < src.length) {
      const c = src[i]!;
      if (c === '\\') i += 2;
      else if (c === '[' && open === '(') {
        i++;
        skipBalanced('[', ']');
        continue;
      } else {
        if (c === open) depth++;
        else if (c === close && --depth === 0) {
          i++;
          return;
        }
        i++;
      }
    }
  };
  while (i < src.length) {
    const c = src[i]!;
    let ch: string;
    if (c === '|') return null;
    if (c === '(' || c === '[') {
      flush();
      skipBalanced(c, c === '(' ? ')' : ']');
      skipQuantifier();
      continue;
    }
    if (c === '.' || c === '^' || c === '$') {
      flush();
      i++;
      skipQuantifier();
      continue;
    }
    if (c === '\\') {
      const e = src[i + 1] ?? '';
      if (/[A-Za-z0-9]/.test(e)) {
        flush();
        i += (e === 'x' || e === 'p' || e === 'P') && src[i + 2] === '{' ? src.indexOf('}', i) + 1 - i : e === 'x' ? 4 : 2;
        skipQuantifier();
        continue;
      }
      ch = e;
      i += 2;
    } else {
      ch = c;
      i++;
    }
    const q = src.slice(i);
    if (/^(?:[*?]|\{0[,}])/.test(q)) {
      flush();
      skipQuantifier();
      continue;
    }
    if (/^(?:\+|\{)/.test(q)) {
      cur += ch;
      flush();
      skipQuantifier();
      continue;
    }
    cur += ch;
  }
  flush();
  return best.length >= 2 && /^[\x20-\x7e]+$/.test(best) ? { literal: ignoreCase ? best.toLowerCase() : best, ignoreCase } : null;
}
