import { describe, expect, it } from 'vitest';
import { keccak256 as viemKeccak } from 'viem';
import jsSha3 from 'js-sha3';
import { keccak256, keccak256Of, keccakBackend, keccakReady } from './keccak.ts';
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

  it('keccak256Of hashes a UTF-8 head and the bytes after it as one message, on both backends', async () => {
    await keccakReady;
    const head = 'pr\u00e9fixe \u{1f600}:';
    for (const len of [0, 1, 135, 136, 600]) {
      const data = new Uint8Array(len).map((_, i) => (i * 7 + len) & 0xff);
      const joined = new Uint8Array([...new TextEncoder().encode(head), ...data]);
      expect(toHex(keccak256Of(head, data))).toBe(viemKeccak(joined));
      expect(toHex(new Uint8Array(jsSha3.keccak256.create().update(head).update(data).arrayBuffer()))).toBe(viemKeccak(joined)); // the fallback's calls
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
