import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, concatBytes, hexToBytes, utf8ToBytes } from '@noble/hashes/utils';
import { parseSigned, rootFromProof, same, signatureCheck, type CheckState } from '../pages/verify.ts';
import { tallyVotes } from './tally.ts';

/**
 * What the verdict page's script checks in the visitor's browser (bundled by assets.ts with @noble/curves and
 * @noble/hashes; the EIP-191 recovery and the RFC 6962 audit path are the pages module's): the signed outcome
 * recovers the published signer and names this verdict; the question and each rationale shown hash to the
 * signed fingerprints; the evidence root recomputes from the signed labels and content hashes; the tally and
 * outcome recount from the signed votes; the anchor's inclusion proof leads from the outcome's hash to its root.
 */
export interface VerdictPageData {
  kind: 'verdict';
  id: string;
  signer: string;
  receipt: { canonical: string; signature: string };
  question: string;
  /** Per juror, in the signed order; null for an abstention. */
  rationales: Array<string | null>;
  anchor: { hash: string; root: string | null; leaf_index: number | null; tree_size: number | null; proof: string[] } | null;
}

export const VERDICT_CHECKS = ['signature', 'binding', 'fingerprints', 'evidence', 'tally', 'anchor'] as const;
export type VerdictCheck = (typeof VERDICT_CHECKS)[number];

export interface VerdictVerdict {
  valid: boolean;
  recovered: string | null;
  checks: Record<VerdictCheck, CheckState>;
  reasons: string[];
}

const unhex = (h: string) => hexToBytes(h.startsWith('0x') ? h.slice(2) : h);
const hex0x = (b: Uint8Array) => `0x${bytesToHex(b)}`;
export const sha256Hex = (text: string) => hex0x(sha256(utf8ToBytes(text)));

/** RFC 6962 Merkle tree hash of the leaves (at least one), 0x-hex. */
export function merkleRootHex(leaves: Uint8Array[]): string {
  const h = (...p: Uint8Array[]) => sha256(concatBytes(...p));
  const mth = (d: Uint8Array[]): Uint8Array => {
    if (d.length === 1) return h(new Uint8Array([0]), d[0]!);
    let k = 1;
    while (k * 2 < d.length) k *= 2;
    return h(new Uint8Array([1]), mth(d.slice(0, k)), mth(d.slice(k)));
  };
  return hex0x(mth(leaves));
}

/** The evidence leaf: sha256(u32be(byte length of the UTF-8 label) || UTF-8 label || the content's sha256). */
export function evidenceLeaf(label: string, contentSha256Hex: string): Uint8Array {
  const l = utf8ToBytes(label);
  const len = new Uint8Array(4);
  new DataView(len.buffer).setUint32(0, l.length);
  return sha256(concatBytes(len, l, unhex(contentSha256Hex)));
}

interface Juror {
  vote: string | null;
  abstained: boolean;
  rationale_sha256: string | null;
}

export function verifyVerdictPage(d: VerdictPageData, publishedSigner: string): VerdictVerdict {
  const reasons: string[] = [];
  const { state: signature, recovered } = signatureCheck(d.receipt, d.signer, publishedSigner, reasons);
  const p = parseSigned(d.receipt.canonical) as Record<string, any> | null;
  const binding: CheckState = p && p.kind === 'judge_verdict' && p.verdict_id === d.id ? 'ok' : 'failed';
  if (binding === 'failed') reasons.push('the signed outcome does not name this verdict');

  const jurors: Juror[] = Array.isArray(p?.jurors) ? p.jurors : [];
  let fingerprints: CheckState = 'failed';
  try {
    const questionOk = same(sha256Hex(d.question), p?.question_sha256);
    const rationalesOk =
      jurors.length === d.rationales.length &&
      jurors.every((j, i) => {
        const r = d.rationales[i] ?? null;
        return j.rationale_sha256 === null ? r === null : r !== null && same(sha256Hex(r), j.rationale_sha256);
      });
    fingerprints = questionOk && rationalesOk ? 'ok' : 'failed';
  } catch {
    fingerprints = 'failed';
  }
  if (fingerprints === 'failed') reasons.push('the question or a rationale shown does not hash to its signed fingerprint');

  let evidence: CheckState = 'failed';
  try {
    const items: Array<{ label: string; sha256: string }> = p?.evidence?.items ?? [];
    if (items.length > 0 && same(merkleRootHex(items.map((i) => evidenceLeaf(i.label, i.sha256))), p?.evidence?.root)) evidence = 'ok';
  } catch {
    evidence = 'failed';
  }
  if (evidence === 'failed') reasons.push('the evidence root does not recompute from the signed labels and content hashes');

  let tally: CheckState = 'failed';
  if (p && Array.isArray(p.options)) {
    const t = tallyVotes(p.options as string[], jurors.map((j) => (j.abstained ? null : j.vote)));
    if (JSON.stringify(t.tally) === JSON.stringify(p.tally) && t.outcome === p.outcome && t.abstentions === p.abstentions) tally = 'ok';
  }
  if (tally === 'failed') reasons.push('the tally or the outcome does not recount from the signed votes');

  let anchor: CheckState = 'absent';
  const a = d.anchor;
  if (a && a.root && a.leaf_index !== null && a.tree_size !== null) {
    // The leaf is the signed outcome's hash: sha256 of its canonical text.
    const leafOk = same(a.hash, sha256Hex(d.receipt.canonical));
    let root: string | null = null;
    try {
      root = rootFromProof(a.hash, a.leaf_index, a.tree_size, a.proof);
    } catch {
      root = null;
    }
    anchor = leafOk && same(root, a.root) ? 'ok' : 'failed';
    if (anchor === 'failed') reasons.push('the inclusion proof does not lead from the outcome\'s hash to the anchored root');
  }

  const checks = { signature, binding, fingerprints, evidence, tally, anchor };
  return { valid: Object.values(checks).every((c) => c !== 'failed'), recovered, checks, reasons };
}
