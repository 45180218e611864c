import { describe, expect, it } from 'vitest';
import { blocklistDetector } from './blocklist.ts';
import { fold, foldedView, originalSpan } from './normalize.ts';
import { analyzePattern, patternProblem, requiredLiteral } from './patterns.ts';

const found = (terms: string[], patterns: string[], text: string) => blocklistDetector(terms, patterns).find(text).map((m) => [m.category, text.slice(m.start, m.end)]);

describe('blocklist detector', () => {
  it('matches whole terms whatever their case, width, compatibility form or spacing', () => {
    expect(fold('  Straße ')).toBe('strasse');
    expect(found(['Acme Corp', 'straße', 'ﬁnance'], [], 'ACME  corp, ＡＣＭＥ Corp, acmecorp, STRASSE, finance-team, refinance')).toEqual([
      ['term', 'ACME  corp'],
      ['term', 'ＡＣＭＥ Corp'],
      ['term', 'STRASSE'],
      ['term', 'finance'],
    ]);
  });

  it('maps a match in the folded text back to the original characters', () => {
    const v = foldedView('x Cafe\u0301  BAR');
    const i = v.text.indexOf('café bar');
    expect(originalSpan(v, i, i + 'café bar'.length)).toEqual([2, 12]);
  });

  it('runs patterns in RE2 on the text as it is', () => {
    expect(found([], ['(?i)project-[a-z]{3,8}', 'TKT-[0-9]{4}'], 'Project-Falcon and tkt-1234 and TKT-5678')).toEqual([
      ['pattern', 'Project-Falcon'],
      ['pattern', 'TKT-5678'],
    ]);
  });
});

describe('patterns', () => {
  it('measures the shortest and longest match', () => {
    expect(analyzePattern('ab{2,5}(c|de)?')).toMatchObject({ min: 3, max: 8 });
    expect(analyzePattern('(?i)x\\d{3}')).toMatchObject({ min: 4, max: 4 });
  });

  it('finds the literal every match contains, so RE2 is asked only when the text holds it', () => {
    expect(requiredLiteral('(?i)ticket-[0-9]{4,6}')).toEqual({ literal: 'ticket-', ignoreCase: true });
    expect(requiredLiteral('INV-[0-9]{5}-[A-Z]{2}')).toEqual({ literal: 'INV-', ignoreCase: false });
    expect(requiredLiteral('ab?cd\\.ef+')).toEqual({ literal: 'cd.ef', ignoreCase: false });
    expect(requiredLiteral('(a|b)xyz|q')).toBeNull();
    expect(requiredLiteral('x(?i)abc')).toBeNull();
    expect(found([], ['(?i)ticket-[0-9]{4}'], 'TICKET-1234')).toEqual([['pattern', 'TICKET-1234']]);
  });

  it('refuses what backtracks catastrophically, what RE2 cannot run, unbounded and empty matches', () => {
    expect(patternProblem('(a+)+$')).toMatch(/catastrophically/);
    expect(patternProblem('(\\w+\\s?)*x')).toMatch(/catastrophically/);
    expect(patternProblem('(a|aa)+')).toMatch(/catastrophically/);
    expect(patternProblem('(?<=a)b')).toMatch(/lookaround/);
    expect(patternProblem('(a)\\1')).toMatch(/backreferences/);
    expect(patternProblem('[a-')).toMatch(/unclosed|RE2/);
    expect(patternProblem('secret-\\w+')).toMatch(/unbounded/);
    expect(patternProblem('a{1,200}')).toMatch(/at most 128/);
    expect(patternProblem('x?')).toMatch(/empty/);
    expect(patternProblem('(\\d{1,3}\\.){3}\\d{1,3}')).toBeNull();
  });
});

describe('patterns on long texts', () => {
  it('find the same matches whether RE2 sees the whole text or the span around the literal', () => {
    const filler = 'é lorem ipsum dolor sit amet '.repeat(40);
    const text = `${filler}TICKET-12345 and ticket-999999 ${filler}ticket-4444${filler}`;
    const windowed = blocklistDetector([], ['(?i)ticket-[0-9]{4,6}']).find(text);
    const anchored = blocklistDetector([], ['(?i)\\bticket-[0-9]{4,6}']).find(text);
    expect(windowed.map((m) => text.slice(m.start, m.end))).toEqual(['TICKET-12345', 'ticket-999999', 'ticket-4444']);
    expect(anchored).toEqual(windowed);
  });
});

describe('folding', () => {
  it('makes the same text with and without the map, for any mix of scripts, marks and white space', () => {
    const samples = ['Ab  Cd\t\n e', 'Cafe\u0301 ＡＢＣ ß ﬁ İ x', 'a \u00a0\u3000 b', 'e\u0301\u0302f😀G', 'x\u00a8 y', '\u0301lead'];
    for (const s of samples) {
      const v = foldedView(s);
      const m = v.map();
      if (m) expect(m.starts.length, s).toBe(v.text.length);
      // Every folded character maps inside the original, in order.
      if (m) for (let i = 1; i < m.starts.length; i++) expect(m.starts[i]!).toBeGreaterThanOrEqual(m.starts[i - 1]!);
    }
  });
});
