import { createHash } from 'node:crypto';

/**
 * The Merkle tree of an anchor batch: RFC 6962 section 2.1 (Certificate Transparency's Merkle Tree Hash)
 * with SHA-256, over the batch's leaves in order. For leaves d(0..n-1):
 *   MTH({d0}) = SHA-256(0x00 || d0)
 *   MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])), k the largest power of two smaller than n
 * so no odd node is duplicated: the right subtree of an uneven split is simply smaller. An inclusion proof
 * is RFC 6962's audit path (sibling hashes from the leaf upwards); `verifyInclusion` is RFC 9162 section
 * 2.1.3.2. Each leaf here is the 32 bytes of an artifact's hash (a run's head hash, a sealed call's
 * commitment, ...).
 */

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
const LEAF = Buffer.from([0]);
const NODE = Buffer.from([1]);

export const leafHash = (d: Buffer): Buffer => sha256(LEAF, d);
export const nodeHash = (left: Buffer, right: Buffer): Buffer => sha256(NODE, left, right);

/** The largest power of two smaller than n (n > 1). */
function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** The root of the leaves (at least one). */
export function merkleRoot(leaves: Buffer[]): Buffer {
  if (leaves.length === 0) throw new Error('a Merkle tree needs at least one leaf');
  // Bottom-up over the RFC 6962 shape: hashing a level in pairs and carrying the last odd node up unpaired
  // yields the same tree as the recursive split at the largest power of two.
  let level = leaves.map(leafHash);
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(nodeHash(level[i]!, level[i + 1]!));
    if (level.length % 2 === 1) next.push(level[level.length - 1]!);
    level = next;
  }
  return level[0]!;
}

/** RFC 6962's audit path of leaf `m` among `leaves`: sibling subtree hashes, nearest the leaf first. */
export function inclusionProof(leaves: Buffer[], m: number): Buffer[] {
  if (!Number.isInteger(m) || m < 0 || m >= leaves.length) throw new Error(`leaf ${m} is not in a tree of ${leaves.length}`);
  const path = (lo: number, hi: number, i: number): Buffer[] => {
    const n = hi - lo;
    if (n === 1) return [];
    const k = split(n);
    return i < k ? [...path(lo, lo + k, i), merkleRoot(leaves.slice(lo + k, hi))] : [...path(lo + k, hi, i - k), merkleRoot(leaves.slice(lo, lo + k))];
  };
  return path(0, leaves.length, m);
}

/** RFC 9162 2.1.3.2: whether `proof` takes leaf `d` at `index` of a tree of `size` to `root`. */
export function verifyInclusion(d: Buffer, index: number, size: number, proof: Buffer[], root: Buffer): boolean {
  if (!Number.isInteger(index) || !Number.isInteger(size) || index < 0 || index >= size) return false;
  let fn = index;
  let sn = size - 1;
  let r = leafHash(d);
  for (const p of proof) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else {
      r = nodeHash(r, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && r.equals(root);
}
