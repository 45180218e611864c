import { ed25519 } from '@noble/curves/ed25519';
import { getAddressEncoder, type Address } from '@solana/addresses';
import { getBase58Encoder } from '@solana/codecs-strings';
import { checksumAddress, recoverPersonalMessage } from '@svc/shared';

/** What a registration is and is not; every claim answer carries it. */
export const REGISTRATION_ONLY =
  'Registration only: this records that the holder of these two wallets asked for support and proved both keys and a finalized ' +
  'transaction that raised the Solana address\'s balance of the token. It is not an approval of any claim and not a promise of payment.';

export interface MessageFields {
  origin: string;
  solanaAddress: string;
  evmAddress: string;
  mint: string;
  nonce: string;
  issuedAt: Date;
  expiresAt: Date;
}

/** The exact text both wallets sign (UTF-8; lines joined by \n, no trailing newline). */
export function supportMessage(f: MessageFields): string {
  return [
    `${f.origin} asks you to sign a holder support claim.`,
    '',
    `Solana address: ${f.solanaAddress}`,
    `EVM address: ${checksumAddress(f.evmAddress)}`,
    `Token mint: ${f.mint}`,
    `Nonce: ${f.nonce}`,
    `Issued at: ${f.issuedAt.toISOString()}`,
    `Expiration time: ${f.expiresAt.toISOString()}`,
    '',
    'This registers a claim only. It is not an approval and not a promise of payment.',
  ].join('\n');
}

/** Base58 text to bytes, or null when it is not base58 of `length` bytes. */
export function base58Bytes(s: string, length: number): Uint8Array | null {
  try {
    const b = getBase58Encoder().encode(s);
    return b.length === length ? Uint8Array.from(b) : null;
  } catch {
    return null;
  }
}

/** An ed25519 signature (base58, 64 bytes) by the Solana address (its 32-byte public key) over the message's UTF-8 bytes. */
export function verifySolana(message: string, signatureB58: string, address: string): boolean {
  const sig = base58Bytes(signatureB58, 64);
  if (!sig) return false;
  const key = Uint8Array.from(getAddressEncoder().encode(address as Address));
  try {
    return ed25519.verify(sig, new TextEncoder().encode(message), key);
  } catch {
    return false;
  }
}

/** An EIP-191 personal_sign signature over the message by the EVM address. */
export function verifyEvm(message: string, signature: string, address: string): boolean {
  const who = recoverPersonalMessage(message, signature);
  return who !== null && who.toLowerCase() === address.toLowerCase();
}
