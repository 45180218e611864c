import { createHmac, hkdfSync } from 'node:crypto';
import { PREFIX, newSecret, sha256Hex } from '@svc/shared';

/** Lifetimes and the refresh grace window (RFC 9700 §4.14.2). */
export const OAUTH_TTL = {
  /** An authorization code: exchanged by the client right after the redirect. */
  codeMs: 60_000,
  /** A pending authorization request: the user reads the consent page and answers. */
  requestMs: 10 * 60_000,
  accessMs: 3600_000,
  refreshMs: 30 * 24 * 3600_000,
  /**
   * How long after a refresh token was rotated a second use of it still succeeds, answered with the same
   * successor: two requests a client sent at once (two tabs, a retry after a lost answer). Later, a use is a
   * replay and revokes the whole family.
   */
  refreshGraceMs: 10_000,
} as const;

export const newCode = () => newSecret(PREFIX.oauthCode);
export const newAccessToken = () => newSecret(PREFIX.oauthAccessToken);
export const newRefreshToken = () => newSecret(PREFIX.oauthRefreshToken);
export const tokenHash = (secret: string) => sha256Hex(secret);

/**
 * The tokens a refresh token rotates to, derived from it with a key of this gateway (HMAC-SHA256 under a key
 * drawn from the seal key by HKDF). Deriving them, rather than drawing them at random, lets a second use
 * within the grace window answer the very same successor without the gateway ever storing a token it could
 * show again: only their hashes are kept, and nobody without the presented token and the key can compute them.
 */
export class Successors {
  private readonly key: Buffer;
  constructor(sealKey: Uint8Array) {
    this.key = Buffer.from(hkdfSync('sha256', sealKey, Buffer.alloc(0), 'svc oauth refresh successors v1', 32));
  }

  of(refreshToken: string): { refresh: string; access: string } {
    const mac = (label: string) => createHmac('sha256', this.key).update(label).update('\0').update(refreshToken).digest('base64url');
    return { refresh: PREFIX.oauthRefreshToken + mac('refresh'), access: PREFIX.oauthAccessToken + mac('access') };
  }
}
