import { describe, expect, it } from 'vitest';
import { secp256k1 } from '@noble/curves/secp256k1';
import * as mod from '@noble/curves/abstract/modular';
import { getAddress, hashMessage, recoverMessageAddress, verifyMessage as viemVerifyMessage } from 'viem';
import { privateKeyToAccount, privateKeyToAddress as viemPrivateKeyToAddress } from 'viem/accounts';
import { Wallet, verifyMessage as ethersVerifyMessage } from 'ethers';
import {
  checksumAddress,
  generatePrivateKey,
  hashPersonalMessage,
  isAddress,
  isPrivateKey,
  privateKeyToAddress,
  publicKeyToAddress,
  recoverPersonalMessage,
  signPersonalMessage,
  signPersonalMessagePrepared,
  type PreparedNonce,
} from './eip191.ts';
import { fromHex, toHex, type Hex } from './hex.ts';

// Well-known keys with published addresses (web3.js docs example; Hardhat/Anvil account #0).
const WEB3_KEY: Hex = '0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318';
const WEB3_ADDR = '0x2c7536E3605D9C16a7a3D7b1898e529396a65c23';
const HARDHAT_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const HARDHAT_ADDR = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

const N = secp256k1.CURVE.n;

const MESSAGES: Array<[string, string | Uint8Array]> = [
  ['ascii', 'Some data'],
  ['empty string', ''],
  ['multi-line', 'line one\nline two\n\nline four'],
  ['unicode (BMP, astral, combining)', 'héllo wörld — € 日本語 😀 e\u0301'],
  ['long (1000+ bytes)', 'x'.repeat(1234)],
  ['bytes', new Uint8Array([0, 1, 2, 3, 0xfe, 0xff])],
  ['empty bytes', new Uint8Array([])],
  ['bytes that are not UTF-8', new Uint8Array([0xc3, 0x28, 0xa0, 0xa1, 0xff])],
];

/** viem's message argument for either a string or raw bytes. */
const viemMsg = (m: string | Uint8Array) => (typeof m === 'string' ? m : { raw: m });

function flipByte(hex: Hex, index: number, mask = 0x01): Hex {
  const b = fromHex(hex);
  b[index] = b[index]! ^ mask;
  return toHex(b);
}

/** The malleable twin of a low-s signature: s' = n - s with the recovery bit flipped. Recovers the same key. */
function highSTwin(sig: Hex): Hex {
  const b = fromHex(sig);
  const s = BigInt(toHex(b.slice(32, 64)));
  const s2 = N - s;
  const out = new Uint8Array(65);
  out.set(b.slice(0, 32), 0);
  out.set(fromHex(s2.toString(16).padStart(64, '0')), 32);
  out[64] = b[64] === 27 ? 28 : 27;
  return toHex(out);
}

describe('addresses', () => {
  it('derives the published addresses of well-known keys', () => {
    expect(privateKeyToAddress(WEB3_KEY)).toBe(WEB3_ADDR);
    expect(privateKeyToAddress(HARDHAT_KEY)).toBe(HARDHAT_ADDR);
  });

  it('matches viem privateKeyToAddress (EIP-55 checksummed) for random keys', () => {
    for (let i = 0; i < 25; i++) {
      const key = generatePrivateKey();
      expect(isPrivateKey(key)).toBe(true);
      const ours = privateKeyToAddress(key);
      expect(ours).toBe(viemPrivateKeyToAddress(key));
      expect(ours).toBe(new Wallet(key).address);
      expect(ours).toMatch(/^0x[0-9a-fA-F]{40}$/);
    }
  });

  it('publicKeyToAddress accepts compressed and uncompressed keys', () => {
    const priv = fromHex(HARDHAT_KEY);
    expect(publicKeyToAddress(secp256k1.getPublicKey(priv, false))).toBe(HARDHAT_ADDR);
    expect(publicKeyToAddress(secp256k1.getPublicKey(priv, true))).toBe(HARDHAT_ADDR);
  });

  it('checksumAddress equals viem getAddress regardless of input case', () => {
    // EIP-55 test vectors from the EIP itself.
    const vectors = [
      '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
      '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
      '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
      '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
      '0x52908400098527886E0F7030069857D2E4169EE7',
      '0x8617E340B3D01FA5F11F306F4090FD50E238070D',
      '0xde709f2102306220921060314715629080e2fb77',
      '0x27b1fdb04752bbc536007a920d24acb045561c26',
    ];
    for (const v of vectors) {
      expect(checksumAddress(v.toLowerCase())).toBe(v);
      expect(checksumAddress(v.toUpperCase().replace('0X', '0x'))).toBe(v);
    }
    for (let i = 0; i < 20; i++) {
      const raw = toHex(secp256k1.utils.randomPrivateKey().slice(0, 20));
      expect(checksumAddress(raw)).toBe(getAddress(raw));
    }
  });

  it('isAddress and isPrivateKey reject malformed input', () => {
    expect(isAddress(HARDHAT_ADDR)).toBe(true);
    expect(isAddress(HARDHAT_ADDR.toLowerCase())).toBe(true);
    expect(isAddress(HARDHAT_ADDR.slice(0, -2))).toBe(false);
    expect(isAddress(HARDHAT_ADDR.slice(2))).toBe(false);
    expect(isAddress(`${HARDHAT_ADDR.slice(0, -1)}g`)).toBe(false);
    expect(isAddress(42)).toBe(false);
    expect(isPrivateKey(HARDHAT_KEY)).toBe(true);
    expect(isPrivateKey(`0x${'00'.repeat(32)}`)).toBe(false); // zero
    expect(isPrivateKey(`0x${N.toString(16)}`)).toBe(false); // n itself
    expect(isPrivateKey(`0x${(N - 1n).toString(16)}`)).toBe(true);
    expect(isPrivateKey(HARDHAT_KEY.slice(0, -2))).toBe(false);
    expect(isPrivateKey(undefined)).toBe(false);
  });
});

describe('hashPersonalMessage', () => {
  it('equals viem hashMessage for strings and bytes', () => {
    for (const [, m] of MESSAGES) expect(toHex(hashPersonalMessage(m))).toBe(hashMessage(viemMsg(m)));
  });

  it('prefixes the byte length, not the UTF-16 length', () => {
    // "€" is 1 UTF-16 unit but 3 UTF-8 bytes; the string and its bytes must hash identically.
    expect(toHex(hashPersonalMessage('€'))).toBe(toHex(hashPersonalMessage(new TextEncoder().encode('€'))));
    expect(toHex(hashPersonalMessage('€'))).not.toBe(toHex(hashPersonalMessage('a')));
  });
});

describe('signPersonalMessagePrepared', () => {
  /** A nonce prepared the way the signer's worker does, here with @noble/curves' arithmetic. */
  function prepare(key: Hex): PreparedNonce {
    for (;;) {
      const k = BigInt(toHex(secp256k1.utils.randomPrivateKey()));
      const R = secp256k1.ProjectivePoint.BASE.multiply(k).toAffine();
      if (R.x >= N) continue;
      const kinv = mod.invert(k, N);
      return { r: R.x.toString(16).padStart(64, '0'), parity: Number(R.y & 1n), kinv, a: (((kinv * R.x) % N) * BigInt(key)) % N };
    }
  }

  it('makes low-s signatures that viem and ethers recover to the key, through both recovery ids', async () => {
    const seen = { flipped: 0, kept: 0, v27: 0, v28: 0 };
    for (let i = 0; i < 64; i++) {
      const nonce = prepare(HARDHAT_KEY);
      const message = `receipt ${i} ✓`;
      const sig = signPersonalMessagePrepared(message, nonce)!;
      const s = BigInt(`0x${sig.slice(66, 130)}`);
      expect(s <= N >> 1n).toBe(true);
      expect(sig.slice(2, 66)).toBe(nonce.r);
      const z = BigInt(toHex(hashPersonalMessage(message)));
      if ((nonce.kinv * z + nonce.a) % N === s) seen.kept++;
      else seen.flipped++;
      if (sig.endsWith('1b')) seen.v27++;
      else seen.v28++;
      expect(recoverPersonalMessage(message, sig)).toBe(HARDHAT_ADDR);
      if (i < 8) {
        expect(await recoverMessageAddress({ message, signature: sig })).toBe(HARDHAT_ADDR);
        expect(ethersVerifyMessage(message, sig)).toBe(HARDHAT_ADDR);
      }
    }
    // with 64 random nonces every branch is taken (each misses with probability 2^-64)
    expect(Math.min(seen.flipped, seen.kept, seen.v27, seen.v28)).toBeGreaterThan(0);
  });

  it('normalises the boundary values of s exactly, and refuses s = 0 (keys chosen so that s comes out as each)', async () => {
    const HALF = N >> 1n;
    const cases: Array<[bigint, bigint | null]> = [[0n, null], [1n, 1n], [2n ** 240n - 1n, 2n ** 240n - 1n], [HALF, HALF], [HALF + 1n, HALF], [N - 1n, 1n], [N - 256n, 256n]];
    for (const [s, want] of cases) {
      const message = `boundary ${s}`;
      const z = BigInt(toHex(hashPersonalMessage(message)));
      const k = BigInt(toHex(secp256k1.utils.randomPrivateKey()));
      const R = secp256k1.ProjectivePoint.BASE.multiply(k).toAffine();
      const d = mod.mod((s * k - z) * mod.invert(R.x, N), N); // then k⁻¹(z + r·d) = s
      const key = `0x${d.toString(16).padStart(64, '0')}` as Hex;
      const kinv = mod.invert(k, N);
      const nonce = { r: R.x.toString(16).padStart(64, '0'), parity: Number(R.y & 1n), kinv, a: (((kinv * R.x) % N) * d) % N };
      const sig = signPersonalMessagePrepared(message, nonce);
      if (want === null) {
        expect(sig).toBeNull();
        continue;
      }
      expect(BigInt(`0x${sig!.slice(66, 130)}`)).toBe(want);
      expect(recoverPersonalMessage(message, sig!)).toBe(privateKeyToAddress(key));
      expect(await recoverMessageAddress({ message, signature: sig! })).toBe(privateKeyToAddress(key));
    }
  });

  it("a nonce prepared for another key makes a signature that does not recover to this one", () => {
    const sig = signPersonalMessagePrepared('x', prepare(WEB3_KEY))!;
    expect(recoverPersonalMessage('x', sig)).toBe(WEB3_ADDR);
    expect(recoverPersonalMessage('x', sig)).not.toBe(HARDHAT_ADDR);
  });
});

describe('signPersonalMessage', () => {
  it('is deterministic (RFC 6979) and matches the published web3.js vector', () => {
    const sig = signPersonalMessage(WEB3_KEY, 'Some data');
    expect(sig).toBe(
      '0xb91467e570a6466aa9e9876cbcd013baba02900b8979d43fe208a4a4f339f5fd6007e74cd82e037b800186422fc2da167c747ef045e5d18a5f5d4300f8e1a0291c',
    );
    expect(signPersonalMessage(WEB3_KEY, 'Some data')).toBe(sig);
  });

  it('produces 65-byte low-s signatures with v in {27, 28}', () => {
    const seenV = new Set<number>();
    for (let i = 0; i < 40; i++) {
      const sig = signPersonalMessage(HARDHAT_KEY, `message ${i}`);
      expect(sig).toMatch(/^0x[0-9a-f]{130}$/);
      const b = fromHex(sig);
      seenV.add(b[64]!);
      expect([27, 28]).toContain(b[64]);
      expect(BigInt(toHex(b.slice(32, 64))) <= N / 2n).toBe(true);
    }
    expect(seenV).toEqual(new Set([27, 28])); // both recovery ids occur over 40 messages
  });

  it.each(MESSAGES)('our signature over %s verifies in viem and ethers', async (_name, m) => {
    const key = generatePrivateKey();
    const addr = privateKeyToAddress(key);
    const sig = signPersonalMessage(key, m);

    expect(await viemVerifyMessage({ address: addr, message: viemMsg(m), signature: sig })).toBe(true);
    expect(await recoverMessageAddress({ message: viemMsg(m), signature: sig })).toBe(addr);
    expect(ethersVerifyMessage(m, sig)).toBe(addr);
    // Same bytes as viem's own signer and ethers' Wallet (both deterministic RFC 6979, low-s).
    expect(await privateKeyToAccount(key).signMessage({ message: viemMsg(m) })).toBe(sig);
    expect(await new Wallet(key).signMessage(m)).toBe(sig);
    // And a different address does not verify in viem.
    expect(
      await viemVerifyMessage({ address: privateKeyToAddress(generatePrivateKey()), message: viemMsg(m), signature: sig }),
    ).toBe(false);
  });
});

describe('recoverPersonalMessage', () => {
  it.each(MESSAGES)('recovers viem and ethers signatures over %s', async (_name, m) => {
    const key = generatePrivateKey();
    const addr = viemPrivateKeyToAddress(key);
    const viemSig = await privateKeyToAccount(key).signMessage({ message: viemMsg(m) });
    const ethersSig = await new Wallet(key).signMessage(m);
    expect(recoverPersonalMessage(m, viemSig)).toBe(addr);
    expect(recoverPersonalMessage(m, ethersSig)).toBe(addr);
    expect(recoverPersonalMessage(m, signPersonalMessage(key, m))).toBe(addr);
  });

  it('recovers the published web3.js vector', () => {
    const sig =
      '0xb91467e570a6466aa9e9876cbcd013baba02900b8979d43fe208a4a4f339f5fd6007e74cd82e037b800186422fc2da167c747ef045e5d18a5f5d4300f8e1a0291c';
    expect(recoverPersonalMessage('Some data', sig)).toBe(WEB3_ADDR);
  });

  it('accepts v as 0/1 as well as 27/28 and upper-case hex', () => {
    const m = 'v normalisation';
    const sig = signPersonalMessage(HARDHAT_KEY, m);
    const b = fromHex(sig);
    b[64] = b[64]! - 27;
    expect(recoverPersonalMessage(m, toHex(b))).toBe(HARDHAT_ADDR);
    expect(recoverPersonalMessage(m, `0x${sig.slice(2).toUpperCase()}`)).toBe(HARDHAT_ADDR);
  });

  it('rejects other v values', () => {
    const m = 'bad v';
    const sig = signPersonalMessage(HARDHAT_KEY, m);
    for (const v of [2, 26, 29, 30, 35, 36, 255]) {
      const b = fromHex(sig);
      b[64] = v;
      expect(recoverPersonalMessage(m, toHex(b)), `v=${v}`).toBeNull();
    }
  });

  it('a changed message recovers a different address, never a throw', () => {
    const m = 'The quick brown fox jumps over the lazy dog';
    const sig = signPersonalMessage(HARDHAT_KEY, m);
    const bytes = new TextEncoder().encode(m);
    for (let i = 0; i < bytes.length; i++) {
      const changed = bytes.slice();
      changed[i] = changed[i]! ^ 0x01;
      const r = recoverPersonalMessage(changed, sig);
      expect(r).not.toBe(HARDHAT_ADDR);
      expect(r).toMatch(/^0x[0-9a-fA-F]{40}$/); // still a valid signature, just for someone else
    }
    expect(recoverPersonalMessage(`${m} `, sig)).not.toBe(HARDHAT_ADDR);
    expect(recoverPersonalMessage(m.slice(0, -1), sig)).not.toBe(HARDHAT_ADDR);
  });

  it('every flipped signature byte gives a different address or null, never a throw', () => {
    const m = 'flip me';
    const sig = signPersonalMessage(HARDHAT_KEY, m);
    let nulls = 0;
    let others = 0;
    for (let i = 0; i < 65; i++) {
      for (const mask of [0x01, 0x80, 0xff]) {
        const r = recoverPersonalMessage(m, flipByte(sig, i, mask));
        expect(r, `byte ${i} mask ${mask}`).not.toBe(HARDHAT_ADDR);
        if (r === null) nulls++;
        else {
          others++;
          expect(r).toMatch(/^0x[0-9a-fA-F]{40}$/);
        }
      }
    }
    expect(nulls).toBeGreaterThan(0); // at least the v byte and the high-s flips
    expect(others).toBeGreaterThan(0);
  });

  it('refuses high-s (malleable) signatures that are otherwise mathematically valid', async () => {
    for (let i = 0; i < 10; i++) {
      const m = `malleable ${i}`;
      const key = generatePrivateKey();
      const addr = privateKeyToAddress(key);
      const sig = signPersonalMessage(key, m);
      const twin = highSTwin(sig);
      expect(twin).not.toBe(sig);
      // Sanity: the twin is mathematically valid for the same key (noble recovers it when not checking s).
      const tb = fromHex(twin);
      const nobleSig = secp256k1.Signature.fromCompact(tb.slice(0, 64)).addRecoveryBit(tb[64]! - 27);
      expect(nobleSig.hasHighS()).toBe(true);
      expect(publicKeyToAddress(nobleSig.recoverPublicKey(hashPersonalMessage(m)).toRawBytes(false))).toBe(addr);
      // Ours refuses it.
      expect(recoverPersonalMessage(m, twin)).toBeNull();
      // The low-s original still recovers.
      expect(recoverPersonalMessage(m, sig)).toBe(addr);
    }
  });

  it('returns null for r or s of zero or >= n', () => {
    const m = 'range';
    const sig = fromHex(signPersonalMessage(HARDHAT_KEY, m));
    const nHex = fromHex(N.toString(16).padStart(64, '0'));
    const zeroR = sig.slice();
    zeroR.fill(0, 0, 32);
    const zeroS = sig.slice();
    zeroS.fill(0, 32, 64);
    const rIsN = sig.slice();
    rIsN.set(nHex, 0);
    const allFF = sig.slice();
    allFF.fill(0xff, 0, 64);
    for (const b of [zeroR, zeroS, rIsN, allFF]) expect(recoverPersonalMessage(m, toHex(b))).toBeNull();
  });

  it('returns null for wrong length or garbage, never throws', () => {
    const m = 'garbage';
    const sig = signPersonalMessage(HARDHAT_KEY, m);
    const cases: unknown[] = [
      '',
      '0x',
      sig.slice(0, -2), // 64 bytes
      `${sig}00`, // 66 bytes
      sig.slice(0, -1), // odd length
      sig.slice(2), // no 0x prefix
      `${sig.slice(0, -2)}zz`, // non-hex
      `0x${'00'.repeat(65)}`,
      `0x${'ff'.repeat(65)}`,
      'not a signature',
      ` ${sig}`,
      `${sig}\n`,
    ];
    for (const c of cases) expect(recoverPersonalMessage(m, c as string), JSON.stringify(c)).toBeNull();
    // Non-string inputs from untrusted JSON must not throw either.
    for (const c of [null, undefined, 42, {}, [], fromHex(sig)]) {
      expect(() => recoverPersonalMessage(m, c as unknown as string)).not.toThrow();
      expect(recoverPersonalMessage(m, c as unknown as string)).toBeNull();
    }
  });
});

describe('native and pure-JS signing agree', () => {
  it('produce identical RFC 6979 signatures', async () => {
    const { nativeSigning } = await import('./eip191.ts');
    expect(nativeSigning).toBe(true);
    for (let i = 0; i < 20; i++) {
      const key = generatePrivateKey();
      const msg = `message ${i} ${'x'.repeat(i * 7)}`;
      expect(signPersonalMessage(key, msg)).toBe(signPersonalMessage(key, msg, { pureJs: true }));
    }
  });
});
