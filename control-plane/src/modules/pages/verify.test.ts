import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashMessage, toHex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { inclusionProof, merkleRoot } from '../anchors/merkle.ts';
import { commitmentOf, personalMessageHash, recoverAddress, rootFromProof, verifyPage, type PageData } from './verify.ts';

const account = privateKeyToAccount(generatePrivateKey());
const signer = account.address.toLowerCase();
const nodeCommitment = (salt: Buffer, text: string) => `0x${createHash('sha256').update(Buffer.concat([salt, Buffer.from(text, 'utf8')])).digest('hex')}`;

async function callPage(text: string | null, over: Partial<PageData> = {}): Promise<PageData> {
  const salt = randomBytes(32);
  const commitment = nodeCommitment(salt, text ?? 'hidden');
  const canonical = JSON.stringify({ call_id: 'call_1', commitment, kind: 'sealed_call', signer });
  return {
    kind: 'call',
    id: 'call_1',
    signer,
    receipt: { canonical, signature: await account.signMessage({ message: canonical }) },
    call: { commitment, text, salt_hex: text === null ? null : salt.toString('hex') },
    anchor: null,
    ...over,
  };
}

describe('the pages\' in-browser checks', () => {
  it('hash and recover EIP-191 messages as viem signs them', async () => {
    for (const message of ['{"a":1}', 'ünïcödé ✓ 🚀', '']) {
      expect(toHex(personalMessageHash(message))).toBe(hashMessage(message));
      expect(recoverAddress(message, await account.signMessage({ message }))).toBe(signer);
    }
    const sig = await account.signMessage({ message: 'x' });
    expect(recoverAddress('y', sig)).not.toBe(signer);
    expect(recoverAddress('x', '0x1234')).toBeNull();
    expect(recoverAddress('x', `${sig.slice(0, -2)}05`)).toBeNull();
  });

  it('recomputes sha256(salt || UTF-8 text) as node does', () => {
    const salt = randomBytes(32);
    for (const text of ['a', 'Grüße, 世界 🚀', 'line\nbreak']) expect(commitmentOf(salt.toString('hex'), text)).toBe(nodeCommitment(salt, text));
  });

  it('takes an RFC 6962 audit path to the root the anchors compute, and refuses a wrong one', () => {
    for (const n of [1, 2, 3, 5, 8, 13]) {
      const leaves = Array.from({ length: n }, () => randomBytes(32));
      const root = `0x${merkleRoot(leaves).toString('hex')}`;
      for (let i = 0; i < n; i++) {
        const proof = inclusionProof(leaves, i).map((b) => `0x${b.toString('hex')}`);
        expect(rootFromProof(`0x${leaves[i]!.toString('hex')}`, i, n, proof)).toBe(root);
        if (n > 1) expect(rootFromProof(`0x${leaves[(i + 1) % n]!.toString('hex')}`, i, n, proof)).not.toBe(root);
      }
    }
    expect(rootFromProof(`0x${'00'.repeat(32)}`, 3, 3, [])).toBeNull();
  });

  it('finds a genuine page valid and any altered byte invalid', async () => {
    const page = await callPage('the forecast');
    expect(verifyPage(page, signer)).toMatchObject({ valid: true, recovered: signer, checks: { signature: 'ok', binding: 'ok', commitment: 'ok', anchor: 'absent' } });
    expect(verifyPage(await callPage(null), signer)).toMatchObject({ valid: true, checks: { commitment: 'absent' } });

    const tampered = { ...page, receipt: { ...page.receipt, canonical: page.receipt.canonical.replace('call_1', 'call_2') } };
    expect(verifyPage(tampered, signer)).toMatchObject({ valid: false, checks: { signature: 'failed' } });
    expect(verifyPage({ ...page, call: { ...page.call!, text: 'the forecast!' } }, signer)).toMatchObject({ valid: false, checks: { signature: 'ok', commitment: 'failed' } });
    expect(verifyPage({ ...page, id: 'call_2' }, signer)).toMatchObject({ valid: false, checks: { binding: 'failed' } });
    const other = privateKeyToAccount(generatePrivateKey()).address;
    expect(verifyPage(page, other)).toMatchObject({ valid: false, checks: { signature: 'failed' } });
    expect(verifyPage({ ...page, receipt: { ...page.receipt, signature: 'not hex' } }, signer).valid).toBe(false);
  });

  it('checks an anchor\'s inclusion proof from the page\'s leaf', async () => {
    const page = await callPage('anchored');
    const leaves = [randomBytes(32), Buffer.from(page.call!.commitment.slice(2), 'hex'), randomBytes(32)];
    const anchor = { hash: page.call!.commitment, root: `0x${merkleRoot(leaves).toString('hex')}`, leaf_index: 1, tree_size: 3, proof: inclusionProof(leaves, 1).map((b) => `0x${b.toString('hex')}`) };
    expect(verifyPage({ ...page, anchor }, signer)).toMatchObject({ valid: true, checks: { anchor: 'ok' } });
    expect(verifyPage({ ...page, anchor: { ...anchor, leaf_index: 0 } }, signer)).toMatchObject({ valid: false, checks: { anchor: 'failed' } });
    expect(verifyPage({ ...page, anchor: { ...anchor, root: null, leaf_index: null, tree_size: null, proof: [] } }, signer).checks.anchor).toBe('absent');
  });
});
