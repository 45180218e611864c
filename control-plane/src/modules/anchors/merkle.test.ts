import { describe, expect, it } from 'vitest';
import { inclusionProof, merkleRoot, verifyInclusion } from './merkle.ts';

// The test vectors of RFC 6962's reference implementation (certificate-transparency, merkle tree tests).
const LEAVES = ['', '00', '10', '2021', '3031', '40414243', '5051525354555657', '606162636465666768696a6b6c6d6e6f'].map((h) => Buffer.from(h, 'hex'));
const ROOTS = [
  '6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d',
  'fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125',
  'aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77',
  'd37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7',
  '4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4',
  '76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef',
  'ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c',
  '5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328',
];

describe('RFC 6962 Merkle tree', () => {
  it('computes the reference roots for 1 to 8 leaves', () => {
    for (let n = 1; n <= 8; n++) expect(merkleRoot(LEAVES.slice(0, n)).toString('hex')).toBe(ROOTS[n - 1]);
  });

  it('gives inclusion proofs that verify for every leaf of every size up to 40, and fail when altered', () => {
    const leaves = Array.from({ length: 40 }, (_, i) => Buffer.from([i, i * 7 % 256]));
    for (let n = 1; n <= 40; n++) {
      const tree = leaves.slice(0, n);
      const root = merkleRoot(tree);
      for (let m = 0; m < n; m++) {
        const proof = inclusionProof(tree, m);
        expect(verifyInclusion(tree[m]!, m, n, proof, root)).toBe(true);
        if (n > 1) {
          expect(verifyInclusion(tree[m]!, (m + 1) % n, n, proof, root)).toBe(false);
          expect(verifyInclusion(Buffer.from('other'), m, n, proof, root)).toBe(false);
          expect(verifyInclusion(tree[m]!, m, n, proof.slice(1), root)).toBe(false);
        }
      }
    }
  });

  it('refuses an empty tree and an index outside it', () => {
    expect(() => merkleRoot([])).toThrow();
    expect(() => inclusionProof(LEAVES, 8)).toThrow();
    expect(verifyInclusion(LEAVES[0]!, 3, 3, [], merkleRoot(LEAVES.slice(0, 3)))).toBe(false);
  });
});
