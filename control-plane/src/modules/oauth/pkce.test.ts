import { describe, expect, it } from 'vitest';
import { isCodeVerifier, pkceMatches, pkceRequestProblem, s256 } from './pkce.ts';

// RFC 7636 Appendix B.
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

describe('PKCE', () => {
  it('computes the S256 challenge of RFC 7636 Appendix B', () => {
    expect(s256(VERIFIER)).toBe(CHALLENGE);
  });

  it('matches only the verifier of the challenge', () => {
    expect(pkceMatches(VERIFIER, CHALLENGE)).toBe(true);
    expect(pkceMatches(VERIFIER.replace(/.$/, 'j'), CHALLENGE)).toBe(false);
    expect(pkceMatches(CHALLENGE, CHALLENGE)).toBe(false); // the challenge itself is no verifier (plain)
    expect(pkceMatches('short', s256('short'))).toBe(false); // under 43 characters
  });

  it('checks the verifier syntax: 43 to 128 unreserved characters', () => {
    expect(isCodeVerifier('a'.repeat(43))).toBe(true);
    expect(isCodeVerifier('a'.repeat(128))).toBe(true);
    expect(isCodeVerifier('a'.repeat(42))).toBe(false);
    expect(isCodeVerifier('a'.repeat(129))).toBe(false);
    expect(isCodeVerifier(`${'a'.repeat(42)}+`)).toBe(false);
  });

  it('requires S256 at authorize: missing, plain and other methods are refused', () => {
    expect(pkceRequestProblem(CHALLENGE, 'S256')).toBeNull();
    expect(pkceRequestProblem(undefined, 'S256')).toMatch(/code_challenge is required/);
    expect(pkceRequestProblem(CHALLENGE, undefined)).toMatch(/plain/);
    expect(pkceRequestProblem(CHALLENGE, 'plain')).toMatch(/plain/);
    expect(pkceRequestProblem(CHALLENGE, 'S512')).toMatch(/not supported/);
    expect(pkceRequestProblem('tooshort', 'S256')).toMatch(/43 characters/);
  });
});
