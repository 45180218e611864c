import { z } from 'zod';
import { ConfigError, jsonEnv } from './parse.ts';

/**
 * EVM chains on which deposits and payment requests are verified, as JSON in SVC_CHAINS, e.g.
 * `[{"name":"base","chain_id":8453,"rpc_url":"https://...","usdt":"0x...","decimals":6,"confirmations":3}]`.
 * Every field is required except `min_deposit_micro_usd` (default 1). Unset or blank means no chains.
 * SVC_SOLANA is reserved: this build verifies no Solana transfers, so setting it stops boot rather than
 * advertising a payment method that could never be credited.
 */
export interface ChainConfig {
  name: string;
  chainId: number;
  rpcUrl: string;
  /** The USDT contract, lowercase 0x-hex. */
  usdt: `0x${string}`;
  decimals: number;
  confirmations: number;
  minDepositMicroUsd: number;
}

const ChainEntry = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9-]{0,31}$/, 'must be a lowercase name such as base (letters, digits, dashes; at most 32)'),
    chain_id: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
    rpc_url: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }),
    usdt: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address'),
    decimals: z.number().int().min(0).max(36),
    confirmations: z.number().int().min(1).max(10_000),
    min_deposit_micro_usd: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).default(1),
  })
  .strict();

const ChainList = z
  .array(ChainEntry)
  .max(32)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    for (const [i, c] of list.entries()) {
      for (const k of [`name:${c.name}`, `id:${c.chain_id}`]) {
        if (seen.has(k)) ctx.addIssue({ code: 'custom', path: [i], message: `duplicate ${k.replace(':', ' ')}` });
        seen.add(k);
      }
    }
  });

export const billingChainsEnv = {
  SVC_CHAINS: jsonEnv(ChainList, [] as ChainConfig[], 'a JSON array of chains', (list) =>
    list.map((c) => ({
      name: c.name,
      chainId: c.chain_id,
      rpcUrl: c.rpc_url,
      usdt: c.usdt.toLowerCase() as `0x${string}`,
      decimals: c.decimals,
      confirmations: c.confirmations,
      minDepositMicroUsd: c.min_deposit_micro_usd,
    })),
  ),
  SVC_SOLANA: z
    .string()
    .optional()
    .refine((v) => v === undefined, 'Solana deposits are not supported by this build; unset SVC_SOLANA'),
  /**
   * Who may claim a transfer to the treasury as a deposit: `linked` (default) credits only transfers sent
   * from a wallet linked to the submitting account, so nobody can claim another payer's transfer seen on
   * chain; `any` credits whichever account submits the transaction first.
   */
  SVC_DEPOSIT_SENDERS: z.enum(['linked', 'any']).default('linked'),
};

/** Cross-checks the chains against the x402 terms: a 402 must name a chain and token the gateway verifies. */
export function billingChains(e: { SVC_CHAINS: ChainConfig[]; SVC_BILLING_ENFORCED: boolean; SVC_PAYMENT_NETWORK: string; SVC_USDT_CONTRACT?: string | undefined }): ChainConfig[] {
  const chains = e.SVC_CHAINS;
  if (chains.length === 0 || !e.SVC_BILLING_ENFORCED) return chains;
  const c = chains.find((x) => x.name === e.SVC_PAYMENT_NETWORK || `eip155:${x.chainId}` === e.SVC_PAYMENT_NETWORK);
  if (!c) throw new ConfigError([`SVC_PAYMENT_NETWORK: "${e.SVC_PAYMENT_NETWORK}" names no chain of SVC_CHAINS (${chains.map((x) => x.name).join(', ')})`]);
  if (e.SVC_USDT_CONTRACT && e.SVC_USDT_CONTRACT.toLowerCase() !== c.usdt) {
    throw new ConfigError([`SVC_USDT_CONTRACT: differs from the usdt of chain "${c.name}" in SVC_CHAINS`]);
  }
  return chains;
}
