import { describe, expect, it } from 'vitest';
import { keccak256 as viemKeccak } from 'viem';
import jsSha3 from 'js-sha3';
import { keccak256, keccakBackend, keccakReady } from './keccak.ts';
import { toHex } from './hex.ts';

describe('keccak256', () => {
  it('uses the WebAssembly Keccak once loaded, and it equals viem and js-sha3 across block boundaries', async () => {
    await keccakReady;
    expect(keccakBackend()).toBe('wasm');
    for (const len of [0, 1, 31, 32, 135, 136, 137, 271, 272, 273, 1000, 4096]) {
      const data = new Uint8Array(len).map((_, i) => (i * 131 + len) & 0xff);
      const want = viemKeccak(data);
      expect(toHex(keccak256(data))).toBe(want);
      expect(toHex(new Uint8Array(jsSha3.keccak256.arrayBuffer(data)))).toBe(want); // the fallback before it loads
    }
  });

  it('returns a fresh array each time (a later digest does not overwrite an earlier one)', async () => {
    await keccakReady;
    const a = keccak256(new Uint8Array([1]));
    const copy = toHex(a);
    keccak256(new Uint8Array([2]));
    expect(toHex(a)).toBe(copy);
  });
});
