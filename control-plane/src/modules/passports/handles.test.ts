import { describe, expect, it } from 'vitest';
import { handleProblem, RESERVED_HANDLES } from './handles.ts';

describe('handle syntax', () => {
  it('takes 3-32 lowercase letters and digits in groups joined by single hyphens', () => {
    for (const ok of ['abc', 'a1b', '007', 'agent-7', 'a-b-c', 'x'.repeat(32), `${'a'.repeat(15)}-${'b'.repeat(16)}`]) expect(handleProblem(ok), ok).toBeNull();
  });

  it('refuses everything else, saying why', () => {
    expect(handleProblem('ab')).toMatch(/3 to 32/);
    expect(handleProblem('x'.repeat(33))).toMatch(/3 to 32/);
    expect(handleProblem('Agent')).toMatch(/lowercase/);
    for (const bad of ['-abc', 'abc-', 'a--b', 'a_b', 'a.b', 'a b', 'ábc', 'abc\u0000', 'a/b']) expect(handleProblem(bad), bad).toMatch(/a-z, 0-9/);
  });

  it('refuses every reserved name', () => {
    for (const r of ['admin', 'api', 'support', 'www', 'root', 'svc', 'proof', 'directory', 'search']) expect(handleProblem(r)).toMatch(/reserved/);
    for (const r of RESERVED_HANDLES) expect(handleProblem(r), r).not.toBeNull();
  });
});
