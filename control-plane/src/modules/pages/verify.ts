import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha2';
import { keccak_256 } from '@noble/hashes/sha3';
import { bytesToHex, concatBytes, hexToBytes, utf8ToBytes } from '@noble/hashes/utils';

/**
 * What the public pages' script checks in the visitor's browser, with @noble/curves and @noble/hashes only
 * (no code of the gateway's beyond this file, no Node APIs): the EIP-191 signature over the receipt's
 * canonical text recovers the published signer, a sealed call's receipt names its call and commitment,
 * a revealed text and salt recompute the commitment, and an anchor's inclusion proof leads to its root.
 * Bundled for the browser by assets.ts; unit-tested in Node against viem.
 */

/** The data a page embeds for its script (and shows as text). */
export interface PageData {
  kind: 'call' | 'receipt';
  /** The call id (/c/{id}) or the receipt's request id (/r/{id}). */
  id: string;
  /** The receipt signer the gateway publishes (GET /v1/receipts/pubkey), as embedded in the page. */
  signer: string;
  receipt: { canonical: string; signature: string };
  call?: { commitment: string; text: string | null; salt_hex: string | null };
  anchor?: { hash: string; root: string | null; leaf_index: number | null; tree_size: number | null; proof: string[] } | null;
}

export type CheckState = 'ok' | 'failed' | 'absent';

export interface Verdict {
  valid: boolean;
  recovered: string | null;
  checks: { signature: CheckState; binding: CheckState; commitment: CheckState; anchor: CheckState };
  reasons: string[];
}

const unhex = (h: string) => hexToBytes(h.startsWith('0x') ? h.slice(2) : h);
const hex0x = (b: Uint8Array) => `0x${bytesToHex(b)}`;

/** keccak256("\x19Ethereum Signed Message:\n" + byte length + message bytes): EIP-191 version 0x45. */
export function personalMessageHash(message: string): Uint8Array {
  const body = utf8ToBytes(message);
  return keccak_256(concatBytes(utf8ToBytes(`\x19Ethereum Signed Message:\n${body.length}`), body));
}

/** The address (lowercase 0x-hex) whose key made this 65-byte r || s || v signature of `message`; null if none. */
export function recoverAddress(message: string, signature: string): string | null {
  try {
    const sig = unhex(signature);
    if (sig.length !== 65) return null;
    const v = sig[64]!;
    const recovery = v >= 27 ? v - 27 : v;
    if (recovery !== 0 && recovery !== 1) return null;
    const point = secp256k1.Signature.fromCompact(sig.slice(0, 64)).addRecoveryBit(recovery).recoverPublicKey(personalMessageHash(message));
    return hex0x(keccak_256(point.toRawBytes(false).slice(1)).slice(-20));
  } catch {
    return null;
  }
}

/** sha256(salt || UTF-8 text), 0x-hex: the sealed call's commitment. */
export function commitmentOf(saltHex: string, text: string): string {
  return hex0x(sha256(concatBytes(unhex(saltHex), utf8ToBytes(text))));
}

/** The root an RFC 6962 audit path leads to from a leaf (RFC 9162 section 2.1.3.2), 0x-hex; null if the path does not fit. */
export function rootFromProof(leafHex: string, index: number, size: number, proof: string[]): string | null {
  if (!(index >= 0 && index < size)) return null;
  const h = (...parts: Uint8Array[]) => sha256(concatBytes(...parts));
  let fn = index;
  let sn = size - 1;
  let r = h(new Uint8Array([0]), unhex(leafHex));
  for (const p of proof) {
    if (sn === 0) return null;
    const sibling = unhex(p);
    if (fn % 2 === 1 || fn === sn) {
      r = h(new Uint8Array([1]), sibling, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else r = h(new Uint8Array([1]), r, sibling);
    fn >>= 1;
    sn >>= 1;
  }
  return sn === 0 ? hex0x(r) : null;
}

/** Two strings equal but for case (addresses, hex). */
export const same = (a: unknown, b: unknown) => typeof a === 'string' && typeof b === 'string' && a.toLowerCase() === b.toLowerCase();

/**
 * The signature check every page runs: the signer the page shows is the published one, and the EIP-191
 * signature of the canonical text recovers it. Adds a reason to `reasons` when it fails.
 */
export function signatureCheck(receipt: { canonical: string; signature: string }, shownSigner: string, publishedSigner: string, reasons: string[]): { state: CheckState; recovered: string | null } {
  const recovered = recoverAddress(receipt.canonical, receipt.signature);
  if (!same(shownSigner, publishedSigner)) {
    reasons.push('the signer shown on this page is not the one the gateway publishes');
    return { state: 'failed', recovered };
  }
  if (!same(recovered, publishedSigner)) {
    reasons.push(recovered ? `the signature recovers ${recovered}, not the published signer` : 'the signature does not recover any address');
    return { state: 'failed', recovered };
  }
  return { state: 'ok', recovered };
}

/** The signed JSON object, or null when the canonical text is not one. */
export function parseSigned(canonical: string): Record<string, unknown> | null {
  try {
    const p: unknown = JSON.parse(canonical);
    return p && typeof p === 'object' && !Array.isArray(p) ? (p as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Every check of a page's data against the signer the gateway publishes. */
export function verifyPage(d: PageData, publishedSigner: string): Verdict {
  const reasons: string[] = [];
  const { state: signature, recovered } = signatureCheck(d.receipt, d.signer, publishedSigner, reasons);
  const payload = parseSigned(d.receipt.canonical);
  let binding: CheckState = 'ok';
  if (!payload) binding = 'failed';
  else if (d.kind === 'call') {
    if (payload.kind !== 'sealed_call' || payload.call_id !== d.id || !same(payload.commitment, d.call?.commitment)) binding = 'failed';
  } else if (payload.id !== d.id) binding = 'failed';
  if (binding === 'failed') reasons.push(d.kind === 'call' ? 'the signed receipt does not name this call and its commitment' : 'the signed receipt is not the one with this id');

  let commitment: CheckState = 'absent';
  if (d.kind === 'call' && d.call && d.call.text !== null && d.call.salt_hex !== null) {
    let got: string | null = null;
    try {
      got = commitmentOf(d.call.salt_hex, d.call.text);
    } catch {
      got = null;
    }
    commitment = same(got, d.call.commitment) ? 'ok' : 'failed';
    if (commitment === 'failed') reasons.push('sha256(salt || text) is not the commitment');
  }

  let anchor: CheckState = 'absent';
  const a = d.anchor;
  if (a && a.root && a.leaf_index !== null && a.tree_size !== null) {
    // The leaf is the call's commitment, or the receipt's hash (sha256 of its canonical text).
    const leafOk = same(a.hash, d.kind === 'call' ? d.call?.commitment : hex0x(sha256(utf8ToBytes(d.receipt.canonical))));
    let root: string | null = null;
    try {
      root = rootFromProof(a.hash, a.leaf_index, a.tree_size, a.proof);
    } catch {
      root = null;
    }
    anchor = leafOk && same(root, a.root) ? 'ok' : 'failed';
    if (anchor === 'failed') reasons.push('the inclusion proof does not lead from the hash to the anchored root');
  }

  const checks = { signature, binding, commitment, anchor };
  return { valid: Object.values(checks).every((c) => c !== 'failed'), recovered, checks, reasons };
}
