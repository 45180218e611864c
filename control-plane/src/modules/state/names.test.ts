import { describe, expect, it } from 'vitest';
import { STATE_KEY_MAX_BYTES, keyProblem, namespaceProblem, nonFinitePath } from './names.ts';

describe('state key syntax', () => {
  it('takes any well-formed text of 1 to 256 UTF-8 bytes without "/" or control characters', () => {
    for (const k of ['a', 'user:42', 'with space', ' padded ', 'Ünïcödé', '日本語', '🙂', 'a.b', '...', '%41', '?#&=', 'back\\slash', 'x'.repeat(STATE_KEY_MAX_BYTES)]) expect(keyProblem(k), k).toBeNull();
  });

  it('refuses the rest, saying why', () => {
    expect(keyProblem('')).toMatch(/empty/);
    expect(keyProblem('x'.repeat(STATE_KEY_MAX_BYTES + 1))).toMatch(/at most 256 bytes/);
    expect(keyProblem('é'.repeat(129))).toMatch(/this one is 258/); // 2 bytes each
    expect(keyProblem('a/b')).toMatch(/"\/"/);
    for (const c of ['\u0000', '\n', '\t', '\u001f', '\u007f', '\u0085', '\u009f']) expect(keyProblem(`a${c}b`), JSON.stringify(c)).toMatch(/control characters/);
    expect(keyProblem('a\ud800b')).toMatch(/lone surrogate/);
    expect(keyProblem('.')).toMatch(/path steps/);
    expect(keyProblem('..')).toMatch(/path steps/);
  });
});

describe('state namespace syntax', () => {
  it('is 1 to 64 of A-Z a-z 0-9 . _ -', () => {
    for (const ns of ['default', 'a', 'A.b_c-9', 'x'.repeat(64)]) expect(namespaceProblem(ns), ns).toBeNull();
    for (const ns of ['', 'x'.repeat(65), 'a b', 'a/b', 'a:b', 'é']) expect(namespaceProblem(ns), ns).toMatch(/1 to 64 characters/);
  });
});

describe('non-finite numbers in a value', () => {
  it('are found with their path; finite ones and other types pass', () => {
    expect(nonFinitePath({ a: [1, 2, { b: 0 }], c: null, d: 'Infinity', e: -0 })).toBeNull();
    expect(nonFinitePath(Infinity)).toBe('');
    expect(nonFinitePath({ a: [1, { b: -Infinity }] })).toBe('.a[1].b');
    expect(nonFinitePath([NaN])).toBe('[0]');
  });
});
