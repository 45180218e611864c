import { merkleRoot } from '../anchors/merkle.ts';

/**
 * The ordered root of a source set (docs/sources.md states it for third parties; `root_algorithm` names it):
 *
 * 1. Members are ordered by their label's UTF-8 bytes, compared as unsigned bytes (shorter prefix first).
 *    Labels are unique in a set, so the order is total.
 * 2. Each member is encoded as
 *      d = uint32_be(len(label_utf8)) || label_utf8 || sha256 (the 32 digest bytes) || uint64_be(byte_len)
 * 3. The root is RFC 6962's Merkle Tree Hash with SHA-256 over d(0..n-1) in that order:
 *      leaf = SHA-256(0x00 || d)            node = SHA-256(0x01 || left || right)
 *    built level by level, pairing neighbours left to right; a last node without a partner is carried up
 *    to the next level unchanged (never duplicated). One member: the root is its leaf. No members: no root.
 * 4. Written as 64 lowercase hex characters.
 */
export const ROOT_ALGORITHM = 'svc-source-set-v1' as const;

/** What a set may hold. */
export const MAX_MEMBERS = 1000;
export const MAX_LABEL_CHARS = 256;
/** byte_len is a JSON number; above 2^53 - 1 it would not read back exactly. */
export const MAX_BYTE_LEN = Number.MAX_SAFE_INTEGER;

export interface Member {
  label: string;
  /** 64 lowercase hex characters. */
  sha256: string;
  byte_len: number;
}

const DIGEST = /^[0-9a-f]{64}$/;

/** Orders labels by their UTF-8 bytes (which is not JavaScript's UTF-16 order for characters past U+FFFF). */
export function compareLabels(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The members in root order (a new array). */
export function orderMembers<M extends Member>(members: readonly M[]): M[] {
  return members
    .map((m) => ({ m, key: Buffer.from(m.label, 'utf8') }))
    .sort((x, y) => Buffer.compare(x.key, y.key))
    .map((x) => x.m);
}

/** The bytes `d` of one member (step 2). */
export function encodeMember(m: Member): Buffer {
  if (!DIGEST.test(m.sha256)) throw new Error(`sha256 of ${JSON.stringify(m.label)} is not 64 lowercase hex characters`);
  if (!Number.isSafeInteger(m.byte_len) || m.byte_len < 0) throw new Error(`byte_len of ${JSON.stringify(m.label)} is not a non-negative integer`);
  const label = Buffer.from(m.label, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(label.length);
  const size = Buffer.alloc(8);
  size.writeBigUInt64BE(BigInt(m.byte_len));
  return Buffer.concat([len, label, Buffer.from(m.sha256, 'hex'), size]);
}

/** The ordered root of `members` (any order in; at least one, labels unique), as 64 lowercase hex. */
export function orderedRoot(members: readonly Member[]): string {
  if (members.length === 0) throw new Error('a source set has at least one member');
  const ordered = orderMembers(members);
  for (let i = 1; i < ordered.length; i++) {
    if (compareLabels(ordered[i - 1]!.label, ordered[i]!.label) === 0) throw new Error(`label ${JSON.stringify(ordered[i]!.label)} appears twice`);
  }
  // The same tree as the public anchors' batches (anchors/merkle.ts).
  return merkleRoot(ordered.map(encodeMember)).toString('hex');
}

/** Whether `members` (as stored, possibly altered since) still recompute to `root`; never throws. */
export function rootRecomputes(members: readonly Member[], root: string): boolean {
  try {
    return orderedRoot(members) === root;
  } catch {
    return false;
  }
}
