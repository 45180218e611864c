import { createHash, timingSafeEqual } from 'node:crypto';

/** RFC 7636 §4.1: a code verifier is 43 to 128 characters of A-Z a-z 0-9 - . _ ~ */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** An S256 challenge is the base64url (unpadded) sha256 of the verifier: 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export function isCodeVerifier(s: string): boolean {
  return VERIFIER.test(s);
}

/** BASE64URL(SHA256(ASCII(code_verifier))), RFC 7636 §4.2. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/**
 * What is wrong with an authorization request's PKCE parameters, or null. Only S256 is accepted: a missing
 * method means `plain` (RFC 7636 §4.3), which is refused like an explicit `plain`.
 */
export function pkceRequestProblem(challenge: string | undefined, method: string | undefined): string | null {
  if (!challenge) return 'code_challenge is required: PKCE with code_challenge_method=S256';
  if (method !== 'S256') {
    return method === undefined || method === 'plain'
      ? 'code_challenge_method must be S256; plain (the default when it is omitted) is refused'
      : `code_challenge_method ${method} is not supported; use S256`;
  }
  if (!S256_CHALLENGE.test(challenge)) return 'code_challenge must be the base64url SHA-256 of the verifier (43 characters)';
  return null;
}

/** Whether a presented verifier matches the challenge stored with the code, compared in constant time. */
export function pkceMatches(verifier: string, challenge: string): boolean {
  if (!isCodeVerifier(verifier)) return false;
  const a = Buffer.from(s256(verifier));
  const b = Buffer.from(challenge);
  return a.length === b.length && timingSafeEqual(a, b);
}
