import { createHash } from 'node:crypto';

/**
 * RFC 6962 / RFC 9162 Merkle trees as a third party would write them from the RFCs, independent of the
 * gateway's code: the tests check the gateway's roots and audit paths with these.
 */
const H = (...b: Buffer[]) => createHash('sha256').update(Buffer.concat(b)).digest();
export const buf = (h: string) => Buffer.from(h.startsWith('0x') ? h.slice(2) : h, 'hex');
export const hex = (b: Buffer) => `0x${b.toString('hex')}`;

/** The Merkle Tree Hash of the leaves (RFC 6962 section 2.1). */
export function mth(d: Buffer[]): Buffer {
  if (d.length === 1) return H(Buffer.from([0]), d[0]!);
  let k = 1;
  while (k * 2 < d.length) k *= 2;
  return H(Buffer.from([1]), mth(d.slice(0, k)), mth(d.slice(k)));
}

/** The root an audit path takes a leaf to (RFC 9162 section 2.1.3.2), or null when the path does not fit. */
export function rootFromPath(leaf: Buffer, index: number, size: number, path: Buffer[]): Buffer | null {
  if (index < 0 || index >= size) return null;
  let [fn, sn, r] = [index, size - 1, H(Buffer.from([0]), leaf)];
  for (const p of path) {
    if (sn === 0) return null;
    if (fn % 2 === 1 || fn === sn) {
      r = H(Buffer.from([1]), p, r);
      while (fn % 2 === 0 && fn !== 0) [fn, sn] = [fn >> 1, sn >> 1];
    } else r = H(Buffer.from([1]), r, p);
    [fn, sn] = [fn >> 1, sn >> 1];
  }
  return sn === 0 ? r : null;
}
