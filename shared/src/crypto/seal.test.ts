import { describe, expect, it } from 'vitest';
import { createCipheriv, randomBytes } from 'node:crypto';
import { Sealer } from './seal.ts';

const KEY = new Uint8Array(Buffer.from('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f', 'hex'));

describe('Sealer', () => {
  it('round-trips strings, bytes, empty and large payloads', () => {
    const s = new Sealer(KEY);
    expect(s.open(s.seal('hello')).toString('utf8')).toBe('hello');
    expect(s.open(s.seal('héllo € 😀', 'row-1'), 'row-1').toString('utf8')).toBe('héllo € 😀');
    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    expect([...s.open(s.seal(bytes, 'x'), 'x')]).toEqual([0, 1, 2, 255, 254]);
    expect(s.open(s.seal('')).length).toBe(0);
    const big = randomBytes(1 << 20);
    expect(s.open(s.seal(big, 'big'), 'big').equals(big)).toBe(true);
  });

  it('uses the documented layout: 0x01 || 12-byte nonce || ciphertext || 16-byte tag', () => {
    const s = new Sealer(KEY);
    const plain = Buffer.from('layout check');
    const sealed = s.seal(plain, 'aad');
    expect(sealed.length).toBe(1 + 12 + plain.length + 16);
    expect(sealed[0]).toBe(1);
    // Recompute independently with node:crypto from the nonce in the blob.
    const iv = sealed.subarray(1, 13);
    const c = createCipheriv('aes-256-gcm', Buffer.from(KEY), iv);
    c.setAAD(Buffer.from('aad'));
    const expected = Buffer.concat([Buffer.from([1]), iv, c.update(plain), c.final(), c.getAuthTag()]);
    expect(sealed.equals(expected)).toBe(true);
    // The ciphertext does not contain the plaintext.
    expect(sealed.includes(plain)).toBe(false);
    expect(s.seal('').length).toBe(29);
  });

  it('uses a fresh nonce for every seal', () => {
    const s = new Sealer(KEY);
    const nonces = new Set<string>();
    const blobs = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const b = s.seal('same plaintext', 'same aad');
      nonces.add(b.subarray(1, 13).toString('hex'));
      blobs.add(b.toString('hex'));
    }
    expect(nonces.size).toBe(1000);
    expect(blobs.size).toBe(1000);
  });

  it('detects tampering with any byte (version, nonce, ciphertext, tag)', () => {
    const s = new Sealer(KEY);
    const sealed = s.seal('tamper-evident payload', 'acct_123');
    for (let i = 0; i < sealed.length; i++) {
      for (const mask of [0x01, 0x80]) {
        const t = Buffer.from(sealed);
        t[i] = t[i]! ^ mask;
        expect(() => s.open(t, 'acct_123'), `byte ${i} mask ${mask}`).toThrow();
      }
    }
    // Untouched still opens.
    expect(s.open(sealed, 'acct_123').toString()).toBe('tamper-evident payload');
  });

  it('detects truncation, extension and garbage', () => {
    const s = new Sealer(KEY);
    const sealed = s.seal('abc', 'a');
    expect(() => s.open(sealed.subarray(0, sealed.length - 1), 'a')).toThrow();
    expect(() => s.open(sealed.subarray(1), 'a')).toThrow();
    expect(() => s.open(Buffer.concat([sealed, Buffer.from([0])]), 'a')).toThrow();
    expect(() => s.open(new Uint8Array(0))).toThrow(/not a sealed value/);
    expect(() => s.open(new Uint8Array(28).fill(1))).toThrow(/not a sealed value/);
    expect(() => s.open(randomBytes(64))).toThrow();
    const v2 = Buffer.from(sealed);
    v2[0] = 2;
    expect(() => s.open(v2, 'a')).toThrow(/not a sealed value/);
  });

  it('binds the AAD: a different or missing AAD throws', () => {
    const s = new Sealer(KEY);
    const sealed = s.seal('secret', 'acct_1');
    expect(() => s.open(sealed, 'acct_2')).toThrow();
    expect(() => s.open(sealed)).toThrow();
    expect(() => s.open(sealed, 'acct_1 ')).toThrow();
    expect(() => s.open(s.seal('secret'), 'acct_1')).toThrow();
    // The default AAD is the empty string.
    expect(s.open(s.seal('secret'), '').toString()).toBe('secret');
    expect(s.open(s.seal('secret', ''), undefined).toString()).toBe('secret');
  });

  it('a different key cannot open it', () => {
    const a = new Sealer(KEY);
    const other = KEY.slice();
    other[31] = other[31]! ^ 1;
    const b = new Sealer(other);
    const sealed = a.seal('secret', 'x');
    expect(() => b.open(sealed, 'x')).toThrow();
    expect(() => new Sealer(randomBytes(32)).open(sealed, 'x')).toThrow();
    expect(a.open(sealed, 'x').toString()).toBe('secret');
  });

  it('copies the key: mutating the caller buffer later does not change the sealer', () => {
    const k = KEY.slice();
    const s = new Sealer(k);
    const sealed = s.seal('secret');
    k.fill(0);
    expect(s.open(sealed).toString()).toBe('secret');
  });

  it('refuses keys that are not 32 bytes', () => {
    for (const n of [0, 1, 16, 24, 31, 33, 64]) {
      expect(() => new Sealer(new Uint8Array(n)), `${n} bytes`).toThrow('seal key must be 32 bytes');
    }
    expect(() => new Sealer(new Uint8Array(32))).not.toThrow();
  });
});
