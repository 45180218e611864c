import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';

/**
 * The marketplace's parts built on the x402 libraries (@x402/evm and its chains), which deps.ts loads only
 * where SVC_MARKET_X402 is configured: a gateway without marketplace payments never loads them.
 */
export { Facilitator } from './facilitator.ts';

/** The x402 version 1 name of a chain (`base`, `base-sepolia`, ...), else its CAIP-2 id. */
export function v1Network(chainId: number): string {
  const name = Object.entries(EVM_NETWORK_CHAIN_ID_MAP).find(([, id]) => id === chainId)?.[0];
  return name ?? `eip155:${chainId}`;
}
