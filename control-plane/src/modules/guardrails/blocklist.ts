import type RE2 from 're2';
import { fold, foldedView, originalSpan } from './normalize.ts';
import { compilePattern } from './patterns.ts';
import { ordered, type Detector, type Match } from './types.ts';

/**
 * Blocklist: terms matched as whole words (not inside a longer word or number) in the text folded the way the
 * terms are (NFKC, case folding, white space runs as one space), so `ＡＣＭＥ  Corp` matches the term
 * `acme corp`; and patterns (RE2, see patterns.ts) matched in the text as it is (`(?i)` makes one ignore case).
 * Category `term` or `pattern`.
 */
export const MAX_TERMS = 500;
export const MAX_TERM_LENGTH = 100;
export const MAX_PATTERNS = 20;

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const WORDISH = /[\p{L}\p{N}]/u;

export function blocklistDetector(terms: readonly string[], patterns: readonly string[]): Detector {
  const folded = [...new Set(terms.map(fold).filter((t) => t.length > 0))].sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
  // Escaped literals only: an alternation of fixed strings, which cannot backtrack catastrophically.
  const termRe = folded.length ? new RegExp(folded.map(escape).join('|'), 'gu') : null;
  const compiled: Array<{ re: RE2; maxSpan: number }> = patterns.map(compilePattern);
  const longestTerm = folded.reduce((m, t) => Math.max(m, t.length), 0);
  // A folded character comes from at most a few original ones (a letter and its combining marks).
  const maxSpan = Math.max(longestTerm ? 2 * longestTerm + 8 : 0, ...compiled.map((c) => c.maxSpan), 1);
  return {
    type: 'blocklist',
    key: `blocklist:${JSON.stringify([folded, [...patterns]])}`,
    maxSpan,
    find(text) {
      const out: Match[] = [];
      if (termRe) {
        const v = foldedView(text);
        const t = v.text;
        termRe.lastIndex = 0;
        let m: RegExpExecArray | null;
        while ((m = termRe.exec(t)) !== null) {
          const end = m.index + m[0].length;
          const before = m.index > 0 ? String.fromCodePoint(t.codePointAt(m.index - 1)!) : '';
          const after = end < t.length ? String.fromCodePoint(t.codePointAt(end)!) : '';
          if ((before && WORDISH.test(before) && WORDISH.test(m[0][0]!)) || (after && WORDISH.test(after) && WORDISH.test(m[0].at(-1)!))) {
            termRe.lastIndex = m.index + 1;
            continue;
          }
          const [s, e] = originalSpan(v, m.index, end);
          out.push({ start: s, end: e, category: 'term', severity: 'medium' });
        }
      }
      for (const c of compiled) {
        c.re.lastIndex = 0;
        let m: RegExpExecArray | null;
        while ((m = c.re.exec(text)) !== null) {
          if (m[0].length === 0) {
            c.re.lastIndex++;
            continue;
          }
          out.push({ start: m.index, end: m.index + m[0].length, category: 'pattern', severity: 'medium' });
        }
      }
      return ordered(out);
    },
  };
}
