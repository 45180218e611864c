import { createRequire } from 'node:module';
import { secp256k1 } from '@noble/curves/secp256k1';
import { keccak_256 } from '@noble/hashes/sha3';
import { keccak256Of } from './keccak.ts';
import { fromHex, isHex, toHex, type Hex } from './hex.ts';
import { signDigestPrepared, type PreparedNonce } from './prepared-signature.mjs';

/**
 * EIP-191 version 0x45 ("personal_sign") signing and recovery over secp256k1.
 * Signatures are 65 bytes r || s || v with v in {27, 28}, as Ethereum wallets produce them.
 */

const enc = new TextEncoder();

/** The EIP-191 digest of a message (the tests check it against viem's hashMessage). */
export function hashPersonalMessage(message: string | Uint8Array): Uint8Array {
  const body = typeof message === 'string' ? enc.encode(message) : message;
  return keccak256Of(`\x19Ethereum Signed Message:\n${body.length}`, body);
}

/** EIP-55 checksummed address of an uncompressed or compressed public key. */
export function publicKeyToAddress(publicKey: Uint8Array): Hex {
  const point = secp256k1.ProjectivePoint.fromHex(publicKey);
  const raw = point.toRawBytes(false).slice(1);
  return checksumAddress(toHex(keccak_256(raw).slice(-20)));
}

export function privateKeyToAddress(privateKey: Hex): Hex {
  return publicKeyToAddress(secp256k1.getPublicKey(fromHex(privateKey), false));
}

export function checksumAddress(address: string): Hex {
  const lower = address.toLowerCase().replace(/^0x/, '');
  const hash = Buffer.from(keccak_256(enc.encode(lower))).toString('hex');
  let out = '0x';
  for (let i = 0; i < lower.length; i++) {
    out += parseInt(hash[i]!, 16) >= 8 ? lower[i]!.toUpperCase() : lower[i]!;
  }
  return out as Hex;
}

export function isAddress(s: unknown): s is Hex {
  return isHex(s, 20);
}

/**
 * Signing uses libsecp256k1 through the `secp256k1` native binding when it loads (about ten times faster
 * than pure JS here, so signing never bounds the request rate); @noble/curves signs otherwise and always
 * verifies. Both produce RFC 6979 deterministic, low-s signatures, so the bytes are identical.
 */
type NativeSecp = { ecdsaSign(msg32: Uint8Array, key: Uint8Array): { signature: Uint8Array; recid: number } };
const native: NativeSecp | null = (() => {
  try {
    return createRequire(import.meta.url)('secp256k1') as NativeSecp;
  } catch {
    return null;
  }
})();

export const nativeSigning = native !== null;

export function signPersonalMessage(privateKey: Hex, message: string | Uint8Array, opts: { pureJs?: boolean } = {}): Hex {
  const digest = hashPersonalMessage(message);
  const key = fromHex(privateKey);
  const out = new Uint8Array(65);
  if (native && !opts.pureJs) {
    const { signature, recid } = native.ecdsaSign(digest, key);
    out.set(signature, 0);
    out[64] = 27 + recid;
  } else {
    const sig = secp256k1.sign(digest, key);
    out.set(sig.toCompactRawBytes(), 0);
    out[64] = 27 + sig.recovery;
  }
  return toHex(out);
}

export type { PreparedNonce };

/**
 * EIP-191 personal_sign with a prepared nonce (see prepared-signature.mjs): the request path does one
 * multiplication and one reduction and no curve arithmetic. A prepared nonce is as secret as the key itself
 * (d follows from it), before and after use. Same signature format as `signPersonalMessage` (low-s, v in
 * {27, 28}), but the nonce is random, not RFC 6979's. Null in the (2^-256) case s = 0; the caller then signs
 * the usual way.
 */
export function signPersonalMessagePrepared(message: string | Uint8Array, nonce: PreparedNonce): Hex | null {
  return signDigestPrepared(hashPersonalMessage(message), nonce);
}

/** Recovers the signer address, or null when the signature is malformed or does not recover. */
export function recoverPersonalMessage(message: string | Uint8Array, signature: string): Hex | null {
  if (!isHex(signature, 65)) return null;
  const bytes = fromHex(signature);
  let v = bytes[64]!;
  if (v >= 27) v -= 27;
  if (v !== 0 && v !== 1) return null;
  try {
    const sig = secp256k1.Signature.fromCompact(bytes.slice(0, 64)).addRecoveryBit(v);
    if (sig.hasHighS()) return null; // reject malleable signatures
    const pub = sig.recoverPublicKey(hashPersonalMessage(message));
    return publicKeyToAddress(pub.toRawBytes(false));
  } catch {
    return null;
  }
}

export function generatePrivateKey(): Hex {
  return toHex(secp256k1.utils.randomPrivateKey());
}

export function isPrivateKey(s: unknown): s is Hex {
  if (!isHex(s, 32)) return false;
  return secp256k1.utils.isValidPrivateKey(fromHex(s));
}
