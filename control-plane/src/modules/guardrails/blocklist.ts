import type { LinearRegex } from '../../linear-regex.ts';
import { fold, foldedView, originalSpan } from './normalize.ts';
import { compilePattern, requiredLiteral } from './patterns.ts';
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

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\\-/]/g, '\\$&');
/** A literal in a regex with the `u` flag (where `\\-` is not allowed outside a class). */
const escapeLiteral = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
const WORDISH = /[\p{L}\p{N}]/u;
/** Anchors and word boundaries: a pattern with one matches differently at the edge of a slice of the text. */
const EDGE_SENSITIVE = /\\[bBAz]|[\^$]/;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

interface Trie {
  next: Map<string, Trie>;
  end: boolean;
}

/**
 * The terms as one regex in trie form (`code(?:name-(?:1|2)|word)`): shared prefixes are matched once, so a
 * position is tried against the terms that can start there only; the longest term wins where one extends another.
 */
export function trieSource(terms: readonly string[]): string {
  const root: Trie = { next: new Map(), end: false };
  for (const t of terms) {
    let n = root;
    for (const ch of t) {
      let c = n.next.get(ch);
      if (!c) n.next.set(ch, (c = { next: new Map(), end: false }));
      n = c;
    }
    n.end = true;
  }
  const emit = (n: Trie): string => {
    const alts = [...n.next.entries()].map(([ch, c]) => escape(ch) + emit(c));
    if (!alts.length) return '';
    const body = alts.length === 1 ? alts[0]! : `(?:${alts.join('|')})`;
    return n.end ? `(?:${body})?` : body;
  };
  return emit(root);
}

export function blocklistDetector(terms: readonly string[], patterns: readonly string[]): Detector {
  const folded = [...new Set(terms.map(fold).filter((t) => t.length > 0))].sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
  // Escaped literals only, as a trie: fixed strings, which cannot backtrack catastrophically.
  const termRe = folded.length ? new RegExp(trieSource(folded), 'g') : null;
  const compiled: Array<{ re: LinearRegex; maxSpan: number; needs: ReturnType<typeof requiredLiteral>; literalRe: RegExp | null; windowed: boolean }> = patterns.map((p) => {
    const needs = requiredLiteral(p);
    return { ...compilePattern(p), needs, literalRe: needs?.ignoreCase ? new RegExp(escapeLiteral(needs.literal), 'giu') : null, windowed: !EDGE_SENSITIVE.test(p) };
  });
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
        let from = 0;
        let to = text.length;
        if (c.needs) {
          // Where the literal occurs (first and last); ignoring case as RE2's (?i) does (Unicode simple case
          // folding), without lower-casing the whole text.
          let first = -1;
          let last = -1;
          const lit = c.needs.literal;
          if (c.literalRe) {
            c.literalRe.lastIndex = 0;
            for (let m = c.literalRe.exec(text); m; m = c.literalRe.exec(text)) {
              if (first < 0) first = m.index;
              last = m.index + m[0].length;
            }
          } else if ((first = text.indexOf(lit)) >= 0) last = text.lastIndexOf(lit) + lit.length;
          if (first < 0) continue; // cannot match
          // Every match holds the literal and is at most maxSpan long: RE2 need only see the span around the
          // occurrences (a pattern with anchors or word boundaries, which the edges would change, sees it all).
          if (c.windowed) {
            from = Math.max(0, first - c.maxSpan);
            to = Math.min(text.length, last + c.maxSpan);
            if (from > 0 && isLowSurrogate(text.charCodeAt(from))) from--;
            if (to < text.length && isLowSurrogate(text.charCodeAt(to))) to++;
          }
        }
        const part = from === 0 && to === text.length ? text : text.slice(from, to);
        // A test first (RE2's DFA, no positions kept), then the matches only where there are some.
        if (!c.re.test(part)) continue;
        for (const m of c.re.matches(part)) out.push({ start: from + m.index, end: from + m.index + m.text.length, category: 'pattern', severity: 'medium' });
      }
      return ordered(out);
    },
  };
}
