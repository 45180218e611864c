import { z } from 'zod';

const Evm = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte EVM address');

export const NonceBody = z.strictObject({
  solana_address: z.string().min(32).max(44).describe('The holder\'s Solana address (base58 public key).'),
  evm_address: Evm.describe('The holder\'s EVM address.'),
});

export const ClaimBody = z.strictObject({
  nonce: z.string().min(1).max(100).describe('From POST /v1/support/nonce; single use.'),
  solana_signature: z.string().min(1).max(200).describe("The Solana key's ed25519 signature of the message's UTF-8 bytes, base58."),
  evm_signature: z.string().regex(/^0x[0-9a-fA-F]{130}$/, 'must be a 0x-prefixed 65-byte signature').describe("The EVM key's EIP-191 personal_sign signature of the message."),
  tx_signature: z.string().min(1).max(200).describe('A finalized Solana transaction (base58 signature) that raised the address\'s balance of the configured token mint.'),
});

export const AddressParams = z.object({ address: z.string().min(1).max(100) });

export const NonceView = z.object({
  nonce: z.string(),
  message: z.string().describe('The exact text both wallets sign.'),
  solana_address: z.string(),
  evm_address: z.string(),
  mint: z.string(),
  expires_at: z.string(),
  signing: z.string(),
});

export const ClaimView = z.object({
  object: z.literal('support_claim'),
  status: z.literal('registered').describe('Registered only: never approved, nothing promised.'),
  solana_address: z.string(),
  evm_address: z.string(),
  mint: z.string(),
  tx_signature: z.string(),
  slot: z.string(),
  block_time: z.string().nullable(),
  decimals: z.number(),
  balance_before: z.string().describe('Token base units of the address before the transaction.'),
  balance_after: z.string(),
  raised: z.string(),
  message: z.string(),
  solana_signature: z.string(),
  evm_signature: z.string(),
  registered_at: z.string(),
  notice: z.string(),
  registration: z.object({ document: z.record(z.string(), z.unknown()), canonical: z.string(), signature: z.string(), signer: z.string() }).describe('The registration signed by the gateway (EIP-191 over the RFC 8785 canonical text).'),
});
