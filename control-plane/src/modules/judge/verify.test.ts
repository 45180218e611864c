import { describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import canonicalize from 'canonicalize';
import { evidenceLeaf as nodeLeaf, fingerprint, summarizeEvidence } from './evidence.ts';
import { tallyVotes } from './tally.ts';
import { evidenceLeaf, merkleRootHex, sha256Hex, verifyVerdictPage, type VerdictPageData } from './verify.ts';

const account = privateKeyToAccount(generatePrivateKey());
const signer = account.address.toLowerCase();
const ITEMS = [
  { label: 'a', content: 'first' },
  { label: 'ünïcödé ✓', content: 'Grüße 🚀' },
  { label: 'c', content: '' },
];

async function page(over: (p: Record<string, any>) => void = () => undefined, rationales: Array<string | null> = ['because', null]): Promise<VerdictPageData> {
  const ev = summarizeEvidence(ITEMS);
  const jurors = [
    { model: 'm1', vote: 'yes', abstained: false, rationale_sha256: fingerprint('because') },
    { model: 'm2', vote: null, abstained: true, rationale_sha256: null },
  ];
  const payload: Record<string, any> = { kind: 'judge_verdict', verdict_id: 'vrd_1', options: ['yes', 'no'], question_sha256: fingerprint('Q?'), evidence: ev, jurors, ...tallyVotes(['yes', 'no'], ['yes', null]) };
  over(payload);
  const canonical = canonicalize(payload)!;
  return { kind: 'verdict', id: 'vrd_1', signer, receipt: { canonical, signature: await account.signMessage({ message: canonical }) }, question: 'Q?', rationales, anchor: null };
}

describe("the verdict page's in-browser checks", () => {
  it('compute the evidence leaves, root and fingerprints as the gateway does in node', () => {
    const ev = summarizeEvidence(ITEMS);
    const leaves = ev.items.map((i) => evidenceLeaf(i.label, i.sha256));
    ITEMS.forEach((it, i) => expect(Buffer.from(leaves[i]!).equals(nodeLeaf(it.label, Buffer.from(ev.items[i]!.sha256.slice(2), 'hex')))).toBe(true));
    expect(merkleRootHex(leaves)).toBe(ev.root);
    expect(sha256Hex('Grüße')).toBe(fingerprint('Grüße'));
  });

  it('find a genuine verdict valid, and each kind of alteration invalid', async () => {
    expect(verifyVerdictPage(await page(), signer)).toMatchObject({ valid: true, checks: { signature: 'ok', binding: 'ok', fingerprints: 'ok', evidence: 'ok', tally: 'ok', anchor: 'absent' } });
    expect(verifyVerdictPage({ ...(await page()), question: 'Q!' }, signer).checks.fingerprints).toBe('failed');
    expect(verifyVerdictPage(await page(undefined, ['because', 'I abstained']), signer).checks.fingerprints).toBe('failed');
    expect(verifyVerdictPage(await page((p) => (p.outcome = 'no')), signer)).toMatchObject({ valid: false, checks: { signature: 'ok', tally: 'failed' } });
    expect(verifyVerdictPage(await page((p) => (p.evidence.items[0].sha256 = p.evidence.items[1].sha256)), signer).checks.evidence).toBe('failed');
    expect(verifyVerdictPage({ ...(await page()), id: 'vrd_2' }, signer).checks.binding).toBe('failed');
    expect(verifyVerdictPage(await page(), privateKeyToAccount(generatePrivateKey()).address).checks.signature).toBe('failed');
  });
});
