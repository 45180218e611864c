import { describe, expect, it } from 'vitest';
import { privateKeyToAccount } from 'viem/accounts';
import { createSiweMessage, type SiweMessage } from 'viem/siwe';
import { ServiceError } from '@svc/shared';
import { NONCE_TTL_MS, checkSiwe, type SiwePolicy, type VerifiedSiwe } from './siwe.ts';

const NOW = new Date(Date.UTC(2026, 10, 22, 12, 0, 0));
const SKEW = 60_000;

// Fixed keys so failures are reproducible (Hardhat/Anvil accounts #0 and #1).
const alice = privateKeyToAccount('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80');
const mallory = privateKeyToAccount('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');

const POLICY: SiwePolicy = { publicUrl: new URL('https://gw.example.com'), chainIds: [1, 8453] };
const NONCE = 'n0nceABC123';

function build(over: Partial<SiweMessage> = {}): string {
  return createSiweMessage({
    domain: 'gw.example.com',
    uri: 'https://gw.example.com/v1/auth/verify',
    address: alice.address,
    chainId: 1,
    nonce: NONCE,
    version: '1',
    issuedAt: NOW,
    statement: 'Sign in to the gateway.',
    ...over,
  });
}

async function signed(over: Partial<SiweMessage> = {}, signer = alice) {
  const message = build(over);
  return { message, signature: await signer.signMessage({ message }) };
}

function thrown(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ServiceError);
    return e as ServiceError;
  }
  throw new Error('expected checkSiwe to throw');
}

function expectSiweFail(fn: () => unknown, message: RegExp): void {
  const e = thrown(fn);
  expect(e.type).toBe('invalid_siwe');
  expect(e.status).toBe(401);
  expect(e.message).toMatch(message);
}

function expectInvalid(fn: () => unknown, param: 'message' | 'signature', message: RegExp): void {
  const e = thrown(fn);
  expect(e.type).toBe('invalid_request');
  expect(e.status).toBe(400);
  expect(e.extra).toEqual({ param });
  expect(e.message).toMatch(message);
}

describe('checkSiwe: valid messages', () => {
  it('accepts a viem-built message signed by its address', async () => {
    const { message, signature } = await signed();
    const v: VerifiedSiwe = checkSiwe(message, signature, POLICY, NOW);
    expect(v).toEqual({ address: alice.address.toLowerCase(), nonce: NONCE, chainId: 1 });
    expect(v.address).toBe('0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266');
  });

  it('accepts every allowed chain, and returns it', async () => {
    const { message, signature } = await signed({ chainId: 8453 });
    expect(checkSiwe(message, signature, POLICY, NOW).chainId).toBe(8453);
  });

  it('accepts a matching explicit scheme, optional fields, and resources', async () => {
    const { message, signature } = await signed({
      scheme: 'https',
      expirationTime: new Date(NOW.getTime() + 10 * 60_000),
      notBefore: new Date(NOW.getTime() - 1000),
      requestId: 'req-1',
      resources: ['https://gw.example.com/v1/keys', 'ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq'],
    });
    expect(checkSiwe(message, signature, POLICY, NOW)).toEqual({
      address: alice.address.toLowerCase(),
      nonce: NONCE,
      chainId: 1,
    });
  });

  it('accepts a message without a statement', async () => {
    const { message, signature } = await signed({ statement: undefined });
    expect(checkSiwe(message, signature, POLICY, NOW).nonce).toBe(NONCE);
  });

  it('works for an http localhost gateway with a port', async () => {
    const policy: SiwePolicy = { publicUrl: new URL('http://localhost:8080'), chainIds: [1] };
    const { message, signature } = await signed({ domain: 'localhost:8080', uri: 'http://localhost:8080/', scheme: 'http' });
    expect(checkSiwe(message, signature, policy, NOW).address).toBe(alice.address.toLowerCase());
  });

  it('accepts any path under the gateway origin', async () => {
    const policy: SiwePolicy = { publicUrl: new URL('https://gw.example.com/base/'), chainIds: [1] };
    const { message, signature } = await signed({ uri: 'https://gw.example.com/elsewhere?x=1' });
    expect(checkSiwe(message, signature, policy, NOW).nonce).toBe(NONCE);
  });

  it('allows 60 s of clock skew at each time boundary (inclusive)', async () => {
    const t = NOW.getTime();
    for (const over of [
      { issuedAt: new Date(t + SKEW) }, // issued up to 60 s in the future
      { issuedAt: new Date(t - NONCE_TTL_MS - SKEW) }, // issued up to 5 min + 60 s ago
      { expirationTime: new Date(t + 1) }, // expires 1 ms from now
      { notBefore: new Date(t + SKEW) }, // valid from 60 s in the future
    ]) {
      const { message, signature } = await signed(over);
      expect(checkSiwe(message, signature, POLICY, NOW).nonce, JSON.stringify(over)).toBe(NONCE);
    }
  });
});

describe('checkSiwe: invalid_siwe', () => {
  it('wrong domain', async () => {
    for (const domain of ['evil.example.com', 'gw.example.com:8443', 'example.com', 'sub.gw.example.com']) {
      const { message, signature } = await signed({ domain });
      expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /domain/);
    }
  });

  it('wrong URI origin', async () => {
    for (const uri of [
      'https://evil.example.com/v1/auth/verify',
      'http://gw.example.com/v1/auth/verify', // scheme differs
      'https://gw.example.com:8443/', // port differs
      'https://gw.example.com.evil.com/',
    ]) {
      const { message, signature } = await signed({ uri });
      expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /URI origin/);
    }
  });

  it('wrong scheme', async () => {
    const { message, signature } = await signed({ scheme: 'http' });
    expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /scheme "http"/);
  });

  it('disallowed chain', async () => {
    for (const chainId of [5, 10, 84532]) {
      const { message, signature } = await signed({ chainId });
      expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), new RegExp(`Chain ID ${chainId} is not accepted`));
    }
  });

  it('issuedAt more than 60 s in the future', async () => {
    const { message, signature } = await signed({ issuedAt: new Date(NOW.getTime() + SKEW + 1) });
    expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /Issued At is in the future/);
  });

  it('issuedAt older than 5 minutes + skew', async () => {
    for (const ms of [NONCE_TTL_MS + SKEW + 1, 60 * 60_000]) {
      const { message, signature } = await signed({ issuedAt: new Date(NOW.getTime() - ms) });
      expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /older than the nonce lifetime/);
    }
  });

  it('expired (expirationTime at or before now)', async () => {
    for (const ms of [0, 1, 30_000]) {
      const { message, signature } = await signed({ expirationTime: new Date(NOW.getTime() - ms) });
      expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /expired/);
    }
  });

  it('notBefore more than 60 s in the future', async () => {
    const { message, signature } = await signed({ notBefore: new Date(NOW.getTime() + SKEW + 1) });
    expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /not yet valid/);
  });

  it('signed by someone other than the message address', async () => {
    const { message, signature } = await signed({}, mallory);
    expectSiweFail(() => checkSiwe(message, signature, POLICY, NOW), /not made by the message address/);
  });

  it('signature over a different message (changed nonce) by the right key', async () => {
    const { signature } = await signed({ nonce: 'otherNonce99' });
    expectSiweFail(() => checkSiwe(build(), signature, POLICY, NOW), /not made by the message address/);
  });

  it('a message edited after signing (address swapped to the signer of the original)', async () => {
    const { message, signature } = await signed();
    const edited = message.replace(alice.address, mallory.address);
    expect(edited).not.toBe(message);
    expectSiweFail(() => checkSiwe(edited, signature, POLICY, NOW), /not made by the message address/);
  });

  it('checks run before the signature: a bad domain with a garbage signature is still invalid_siwe', () => {
    expectSiweFail(() => checkSiwe(build({ domain: 'evil.example.com' }), '0x00', POLICY, NOW), /domain/);
  });
});

describe('checkSiwe: malformed message -> invalid_request (param message)', () => {
  it('not a SIWE message at all', () => {
    for (const m of ['', 'hello', 'gw.example.com wants you to sign in with your Ethereum account:\n']) {
      expectInvalid(() => checkSiwe(m, '0x00', POLICY, NOW), 'message', /not an EIP-4361 message/);
    }
  });

  it('missing Issued At', () => {
    const m = build().replace(/\nIssued At: [^\n]+/, '');
    expectInvalid(() => checkSiwe(m, '0x00', POLICY, NOW), 'message', /not an EIP-4361 message \(missing/);
  });

  it('malformed address', () => {
    const m = build().replace(alice.address, alice.address.slice(0, -1));
    expectInvalid(() => checkSiwe(m, '0x00', POLICY, NOW), 'message', /missing (domain|address)/);
  });

  it('wrong version', () => {
    const m = build().replace('\nVersion: 1\n', '\nVersion: 2\n');
    expectInvalid(() => checkSiwe(m, '0x00', POLICY, NOW), 'message', /Version must be 1/);
  });

  it('short nonce', () => {
    const m = build().replace(`Nonce: ${NONCE}`, 'Nonce: abc123');
    expectInvalid(() => checkSiwe(m, '0x00', POLICY, NOW), 'message', /nonce must be at least 8/);
  });

  it('dates that are not RFC 3339', async () => {
    const base = build({ expirationTime: new Date(NOW.getTime() + 60_000), notBefore: NOW });
    const cases: Array<[RegExp, string, RegExp]> = [
      [/Issued At: [^\n]+/, 'Issued At: yesterday', /issuedAt is not an RFC 3339/],
      [/Issued At: [^\n]+/, 'Issued At: 2026-11-22 12:00:00', /issuedAt is not an RFC 3339/],
      [/Expiration Time: [^\n]+/, 'Expiration Time: never', /expirationTime is not an RFC 3339/],
      [/Not Before: [^\n]+/, 'Not Before: 2026-13-45T00:00:00Z', /notBefore is not an RFC 3339/],
    ];
    for (const [re, repl, msg] of cases) {
      const m = base.replace(re, repl);
      expect(m).not.toBe(base);
      const signature = await alice.signMessage({ message: m });
      expectInvalid(() => checkSiwe(m, signature, POLICY, NOW), 'message', msg);
    }
  });

  it('URI that does not parse', async () => {
    const m = build().replace(/URI: [^\n]+/, 'URI: not a uri');
    const signature = await alice.signMessage({ message: m });
    expectInvalid(() => checkSiwe(m, signature, POLICY, NOW), 'message', /URI is not a valid URI/);
  });

  it('longer than 4096 characters', async () => {
    const m = build({ statement: 'x'.repeat(4100) });
    expect(m.length).toBeGreaterThan(4096);
    const signature = await alice.signMessage({ message: m });
    expectInvalid(() => checkSiwe(m, signature, POLICY, NOW), 'message', /longer than 4096/);
  });
});

describe('checkSiwe: malformed signature -> invalid_request (param signature)', () => {
  it('wrong length, garbage, bad v, zero and high-s signatures', async () => {
    const { message, signature } = await signed();
    const highS = (() => {
      const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
      const s = BigInt(`0x${signature.slice(66, 130)}`);
      const v = parseInt(signature.slice(130), 16);
      return `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`;
    })();
    const cases = [
      '',
      '0x',
      'garbage',
      signature.slice(0, -2),
      `${signature}00`,
      signature.slice(2),
      `${signature.slice(0, -2)}1d`, // v = 29
      `0x${'00'.repeat(65)}`,
      highS,
    ];
    for (const sig of cases) {
      expectInvalid(() => checkSiwe(message, sig, POLICY, NOW), 'signature', /not a 65-byte 0x-hex secp256k1 signature/);
    }
    // The untouched signature still passes.
    expect(checkSiwe(message, signature, POLICY, NOW).nonce).toBe(NONCE);
  });
});
