/**
 * A one-time ECDSA nonce k prepared ahead of its message for one key d: R = k·G with R.x < n, so r = R.x
 * (`r`, 64 hex digits), `parity` the low bit of R.y, `kinv` = k⁻¹ and `a` = k⁻¹·r·d, both mod n.
 * Used at most once: two signatures with one nonce reveal the key.
 */
export interface PreparedNonce {
  r: string;
  parity: number;
  kinv: bigint;
  a: bigint;
}

/** secp256k1's group order n. */
export const N: bigint;

/** r || s || v (0x hex, v 27/28, low s) of a 32-byte digest with a prepared nonce; null when s = 0. */
export function signDigestPrepared(digest: Uint8Array, nonce: PreparedNonce): `0x${string}` | null;
