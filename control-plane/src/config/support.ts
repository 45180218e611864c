import { isAddress } from '@solana/addresses';
import { z } from 'zod';
import { ConfigError, intWithDefault } from './parse.ts';

/**
 * Holder support claims: the Solana JSON-RPC endpoint whose finalized transactions are read
 * (SVC_SUPPORT_SOLANA_RPC_URL) and the token mint whose balance a claim's transaction must raise
 * (SVC_SUPPORT_TOKEN_MINT, base58). Both or neither: without them the three /v1/support routes answer 501
 * saying so. A nonce lives SVC_SUPPORT_NONCE_TTL_SECONDS.
 */
export const supportEnv = {
  SVC_SUPPORT_SOLANA_RPC_URL: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  SVC_SUPPORT_TOKEN_MINT: z.string().refine((s) => isAddress(s), 'must be a base58 Solana address (32 bytes)').optional(),
  SVC_SUPPORT_NONCE_TTL_SECONDS: intWithDefault(600, 30, 86_400),
};

export interface SupportConfig {
  /** null: no Solana RPC configured; the routes answer 501. */
  solana: { rpcUrl: string; mint: string } | null;
  nonceTtlSeconds: number;
}

export function supportConfig(e: { SVC_SUPPORT_SOLANA_RPC_URL?: string | undefined; SVC_SUPPORT_TOKEN_MINT?: string | undefined; SVC_SUPPORT_NONCE_TTL_SECONDS: number }): SupportConfig {
  const url = e.SVC_SUPPORT_SOLANA_RPC_URL;
  const mint = e.SVC_SUPPORT_TOKEN_MINT;
  if (Boolean(url) !== Boolean(mint)) throw new ConfigError([`${url ? 'SVC_SUPPORT_TOKEN_MINT' : 'SVC_SUPPORT_SOLANA_RPC_URL'}: required with ${url ? 'SVC_SUPPORT_SOLANA_RPC_URL' : 'SVC_SUPPORT_TOKEN_MINT'} (holder support claims need both)`]);
  return { solana: url && mint ? { rpcUrl: url, mint } : null, nonceTtlSeconds: e.SVC_SUPPORT_NONCE_TTL_SECONDS };
}
