import { describe, expect, it } from 'vitest';
import { blocklistDetector } from './blocklist.ts';
import { fold, foldedView, originalSpan } from './normalize.ts';
import { analyzePattern, patternProblem } from './patterns.ts';

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
