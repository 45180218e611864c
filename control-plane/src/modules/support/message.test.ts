import { ed25519 } from '@noble/curves/ed25519';
import { getBase58Decoder } from '@solana/kit';
import { describe, expect, it } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { supportMessage, verifyEvm, verifySolana } from './message.ts';

const b58 = getBase58Decoder();

describe('the holder support message and its two signatures', () => {
  it('verifies an ed25519 signature by the Solana key and an EIP-191 one by the EVM key over the same text', async () => {
    const secret = ed25519.utils.randomPrivateKey();
    const solana = b58.decode(ed25519.getPublicKey(secret));
    const evm = privateKeyToAccount(generatePrivateKey());
    const msg = supportMessage({ origin: 'https://gw.example', solanaAddress: solana, evmAddress: evm.address, mint: solana, nonce: 'spn_x', issuedAt: new Date(0), expiresAt: new Date(1000) });
    expect(msg).toContain(`EVM address: ${evm.address}`);
    const sSig = b58.decode(ed25519.sign(new TextEncoder().encode(msg), secret));
    const eSig = await evm.signMessage({ message: msg });
    expect(verifySolana(msg, sSig, solana)).toBe(true);
    expect(verifyEvm(msg, eSig, evm.address)).toBe(true);
    // Another message, another key, garbage: refused.
    expect(verifySolana(`${msg} `, sSig, solana)).toBe(false);
    expect(verifySolana(msg, sSig, b58.decode(ed25519.getPublicKey(ed25519.utils.randomPrivateKey())))).toBe(false);
    expect(verifySolana(msg, 'not-base58!', solana)).toBe(false);
    expect(verifyEvm(`${msg} `, eSig, evm.address)).toBe(false);
    expect(verifyEvm(msg, '0x1234', evm.address)).toBe(false);
  });
});
