import { keccak_256 } from '@noble/hashes/sha3';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';

/**
 * The EIP-4361 message a browser wallet signs to sign in here, built in the browser (the consent page's script,
 * the console) with @noble/hashes only: no Node APIs, no code of the gateway beyond this file.
 */

/** EIP-55: the address with its checksum capitals (EIP-4361 messages carry it so). */
export function checksummed(address: string): string {
  const a = address.toLowerCase().replace(/^0x/, '');
  const h = bytesToHex(keccak_256(utf8ToBytes(a)));
  return `0x${[...a].map((c, i) => (parseInt(h[i]!, 16) >= 8 ? c.toUpperCase() : c)).join('')}`;
}

export interface SiweFields {
  /** The gateway's host (`SVC_PUBLIC_URL`'s), and its origin as the URI. */
  domain: string;
  origin: string;
  address: string;
  statement: string;
  chainId: number;
  nonce: string;
  /** The gateway's nonce answer's `expires_at`: issued at five minutes before it, by the gateway's clock, not the device's. */
  nonceExpiresAt: string;
}

export function siweMessage(f: SiweFields): string {
  const issuedAt = new Date(Date.parse(f.nonceExpiresAt) - 5 * 60_000).toISOString();
  return (
    `${f.domain} wants you to sign in with your Ethereum account:\n${checksummed(f.address)}\n\n` +
    `${f.statement}\n\nURI: ${f.origin}\nVersion: 1\nChain ID: ${f.chainId}\nNonce: ${f.nonce}\nIssued At: ${issuedAt}`
  );
}

/** The hex of a message's UTF-8 bytes, as EIP-1193 `personal_sign` takes it. */
export const messageHex = (message: string) => `0x${bytesToHex(utf8ToBytes(message))}`;
