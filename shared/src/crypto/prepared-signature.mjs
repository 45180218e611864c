// ECDSA over secp256k1 with a nonce prepared ahead of its message, in plain JavaScript so that the receipt
// signer's worker thread (control-plane/src/modules/money/sign-worker.mjs), which runs without a TypeScript
// loader, and shared/src/crypto/eip191.ts use this one copy. Types: prepared-signature.d.mts.

/** secp256k1's group order n, and n / 2 (signatures are low-s: s <= n / 2). */
export const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const HALF_N = N >> 1n;

/**
 * The 65-byte signature r || s || v (hex, v in {27, 28}, low s) of a 32-byte digest with a prepared nonce:
 * s = k⁻¹(z + r·d) = kinv·z + a (mod n), so no curve arithmetic. Null in the (2^-256) case s = 0; the caller
 * then signs the usual way.
 */
export function signDigestPrepared(digest, nonce) {
  const z = BigInt(`0x${Buffer.from(digest).toString('hex')}`);
  let s = (nonce.kinv * z + nonce.a) % N;
  if (s === 0n) return null;
  let parity = nonce.parity;
  if (s > HALF_N) {
    s = N - s; // (r, n - s) is the signature of nonce -k, whose point -R has the other y parity
    parity ^= 1;
  }
  return `0x${nonce.r}${s.toString(16).padStart(64, '0')}${parity ? '1c' : '1b'}`;
}
