import { createHash, randomBytes } from 'node:crypto';

/** Bytes of the salt the gateway draws for every sealed call (spec document 3). */
export const SALT_BYTES = 32;

/** The most sealed calls one account holds; the list is complete up to it (withdrawn calls count). */
export const CALLS_CAP = 500;

/** The exact bytes the commitment covers, as the receipt and the public view state them. */
export const COMMITMENT_SCHEME = 'sha256(salt || text): the 32 salt bytes, then the UTF-8 bytes of the text (no separator, no length prefix, no normalization); 0x-hex';

/**
 * What a sealed call's commitment proves and what it does not; every list carries it as `trust_model`.
 */
export const TRUST_MODEL =
  'The commitment sha256(salt || text) fixes one exact text at the time of the signed receipt (and, once its batch is anchored, ' +
  'no later than the anchoring block): after reveal anyone recomputes it from text and salt_hex, and no other text gives the same ' +
  'commitment. It proves neither that the text is true, nor who wrote it, nor that the account made no other commitments it ' +
  'never reveals. Until reveal the text and salt are kept sealed by this gateway: hidden from the public, not from the gateway. ' +
  'Withdrawal destroys both, after which the commitment can never be opened by anyone.';

/** A fresh random salt and the commitment to `text` under it. */
export function commit(text: string): { salt: Buffer; commitment: string } {
  const salt = randomBytes(SALT_BYTES);
  return { salt, commitment: commitmentOf(salt, text) };
}

export function commitmentOf(salt: Uint8Array, text: string): string {
  return `0x${createHash('sha256').update(salt).update(Buffer.from(text, 'utf8')).digest('hex')}`;
}
