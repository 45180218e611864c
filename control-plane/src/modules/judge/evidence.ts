import { createHash } from 'node:crypto';
import { merkleRoot } from '../anchors/merkle.ts';

/**
 * The evidence root of a verdict: an RFC 6962 Merkle tree (anchors/merkle.ts, the public anchors' tree) over
 * one leaf per labeled evidence item, in the order the caller gave them. Each leaf binds a label to the
 * sha256 of its content, length-prefixed so no two (label, content) pairs share a leaf:
 *   d_i = sha256( u32be(byte length of UTF-8 label_i) || UTF-8 label_i || sha256(UTF-8 content_i) )
 *   root = MTH(d_0 .. d_n-1): SHA-256(0x00 || d) for a leaf, SHA-256(0x01 || left || right) for a node.
 * The signed outcome lists each item's label and content sha256, so anyone recomputes the root from them, and
 * whoever holds the evidence recomputes each sha256.
 */
export const EVIDENCE_LEAF = 'd = sha256(u32be(byte length of the UTF-8 label) || UTF-8 label || sha256(UTF-8 content)); leaves in the order given';
export const EVIDENCE_TREE = 'RFC 6962 Merkle tree hash over the leaves: SHA-256(0x00 || d) per leaf, SHA-256(0x01 || left || right) per node, split at the largest power of two below n';

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();
const hex = (b: Buffer) => `0x${b.toString('hex')}`;

export function evidenceLeaf(label: string, contentSha256: Buffer): Buffer {
  const l = Buffer.from(label, 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32BE(l.length);
  return sha256(Buffer.concat([len, l, contentSha256]));
}

export interface EvidenceSummary {
  root: string;
  leaf: string;
  tree: string;
  items: Array<{ label: string; sha256: string }>;
}

/** The labeled items' content hashes and their root (content itself is never kept). */
export function summarizeEvidence(items: ReadonlyArray<{ label: string; content: string }>): EvidenceSummary {
  const hashed = items.map((i) => ({ label: i.label, digest: sha256(Buffer.from(i.content, 'utf8')) }));
  const root = merkleRoot(hashed.map((h) => evidenceLeaf(h.label, h.digest)));
  return { root: hex(root), leaf: EVIDENCE_LEAF, tree: EVIDENCE_TREE, items: hashed.map((h) => ({ label: h.label, sha256: hex(h.digest) })) };
}

export const fingerprint = (text: string): string => hex(sha256(Buffer.from(text, 'utf8')));
