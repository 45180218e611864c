import { invalid, type Clock } from '@svc/shared';
import { hexToBigInt, type Hex } from 'viem';
import type { ChainConfig } from '../../config.ts';
import { RawRpc, type RpcAnswer } from '../attestations/rpc.ts';
import type { Book, EvidenceItem } from './compute.ts';
import { decToString } from './decimal.ts';

/** An on-chain supply observed as a share count: totalSupply / 10^decimals at a pinned block. */
export interface SupplyReading {
  shares: string | null;
  block: number | null;
  evidence: EvidenceItem[];
  error: string | null;
}

const word = (a: RpcAnswer): bigint | null => {
  if (a.exchange.error || a.rpcError || typeof a.result !== 'string' || !/^0x[0-9a-fA-F]{64}$/.test(a.result)) return null;
  return hexToBigInt(a.result as Hex);
};

/**
 * Reads a token's supply at a pinned block (default the head minus the chain's confirmations plus one) from
 * the chain's node, keeping the sha256 of each answer; a node that cannot be read leaves the share count
 * missing (the record is then UNAVAILABLE). A token address without code is a 400.
 */
export async function readSupply(src: NonNullable<Book['supply']>, chain: ChainConfig | undefined, clock: Clock, timeoutMs: number): Promise<SupplyReading> {
  const now = clock.now().toISOString();
  const ref = (input: string, label: string, a: RpcAnswer | null): EvidenceItem => ({ input, source_kind: 'evm_rpc', label, retrieved_at: a?.exchange.read_at.toISOString() ?? now, sha256: a?.exchange.sha256 ?? null, salted: false });
  if (!chain) return { shares: null, block: null, evidence: [ref('supply', `chain ${src.chain} (not configured)`, null)], error: `chain ${src.chain} is not configured on this gateway` };
  const rpc = new RawRpc(chain.rpcUrl, clock, timeoutMs);
  const evidence: EvidenceItem[] = [];
  const id = await rpc.call('eth_chainId', []);
  evidence.push(ref('supply.chain_id', `eip155:${chain.chainId} chain id`, id));
  const served = !id.exchange.error && typeof id.result === 'string' && /^0x[0-9a-f]+$/i.test(id.result) ? Number(hexToBigInt(id.result as Hex)) : null;
  if (served === null) return { shares: null, block: null, evidence, error: id.exchange.error ?? 'the node did not answer its chain id' };
  if (served !== chain.chainId) return { shares: null, block: null, evidence, error: `the node configured for chain ${chain.name} serves chain id ${served}, not ${chain.chainId}` };
  let block = src.block_number;
  if (block === null) {
    const head = await rpc.call('eth_blockNumber', []);
    evidence.push(ref('supply.chain_head', `eip155:${chain.chainId} head`, head));
    if (head.exchange.error || typeof head.result !== 'string') return { shares: null, block: null, evidence, error: head.exchange.error ?? 'the node did not answer its head' };
    block = Math.max(0, Number(hexToBigInt(head.result as Hex)) - (chain.confirmations - 1));
  }
  const tag = `0x${block.toString(16)}`;
  const code = await rpc.call('eth_getCode', [src.address, tag]);
  if (code.result === '0x') throw invalid(`supply.address: ${src.address} holds no contract code on chain ${chain.name} at block ${block}`, 'supply.address');
  const [supply, decimals] = await Promise.all([rpc.call('eth_call', [{ to: src.address, data: '0x18160ddd' }, tag]), rpc.call('eth_call', [{ to: src.address, data: '0x313ce567' }, tag])]);
  evidence.push(ref('supply.total_supply', `eip155:${chain.chainId} total supply at block ${block}`, supply), ref('supply.decimals', `eip155:${chain.chainId} decimals at block ${block}`, decimals));
  const s = word(supply);
  const d = word(decimals);
  if (s === null || d === null || d > 77n) return { shares: null, block, evidence, error: 'the token\'s total supply or decimals could not be read' };
  return { shares: decToString({ n: s, scale: Number(d) }), block, evidence, error: null };
}
