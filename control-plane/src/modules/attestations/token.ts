import { invalid } from '@svc/shared';
import { decodeAbiParameters, hexToBigInt, hexToString, keccak256, type Hex } from 'viem';
import { RawRpc, type Exchange, type RpcAnswer } from './rpc.ts';

/** What one reading is, from where, and what was read. */
export interface Reading {
  name: string;
  kind: 'evm_rpc' | 'https';
  /** Read at the pinned block (anyone re-reads the same bytes); false for the chain id and head, and HTTPS. */
  pinned: boolean;
  value: string | number | null;
  /** read; absent: the contract answered that it has no such fact (the call reverted); unavailable: nothing usable came back. */
  outcome: 'read' | 'absent' | 'unavailable';
  error: string | null;
  exchange: Exchange;
}

export interface ReserveSpec {
  label: string;
  address: string;
  /** The ERC-20 whose balance is read; the asset itself when absent. */
  token: string | null;
}

export interface TokenRead {
  readings: Reading[];
  block: { number: number; hash: string; timestamp: number } | null;
}

const SELECTOR = { name: '0x06fdde03', symbol: '0x95d89b41', decimals: '0x313ce567', totalSupply: '0x18160ddd', balanceOf: '0x70a08231' } as const;
const blockHex = (n: number) => `0x${n.toString(16)}`;
const pad = (address: string) => address.toLowerCase().replace(/^0x/, '').padStart(64, '0');

/** A string fact: an ABI string, or a bytes32 (older tokens) trimmed of its zero bytes. */
function decodeText(data: Hex): string {
  try {
    return decodeAbiParameters([{ type: 'string' }], data)[0];
  } catch {
    if (data.length !== 66) throw new Error('neither an ABI string nor a bytes32');
    return hexToString(data).replace(/\0+$/, '');
  }
}

function decodeUint(data: Hex, bits: number): bigint {
  if (data.length !== 66) throw new Error('not one 32-byte word');
  const v = hexToBigInt(data);
  if (v >= 1n << BigInt(bits)) throw new Error(`larger than uint${bits}`);
  return v;
}

function reading(name: string, pinned: boolean, a: RpcAnswer, decode: (r: unknown) => string | number): Reading {
  const base = { name, kind: 'evm_rpc' as const, pinned, exchange: a.exchange };
  if (a.exchange.error) return { ...base, value: null, outcome: 'unavailable', error: a.exchange.error };
  if (a.rpcError) {
    // A call that reverted: the contract has no such fact. Any other node error: nothing was read.
    const reverted = a.rpcError.code === 3 || /revert/i.test(a.rpcError.message);
    return { ...base, value: null, outcome: reverted ? 'absent' : 'unavailable', error: `the node answered error ${a.rpcError.code}: ${a.rpcError.message}` };
  }
  try {
    return { ...base, value: decode(a.result), outcome: 'read', error: null };
  } catch (e) {
    return { ...base, value: null, outcome: 'absent', error: `the answer does not decode: ${(e as Error).message}` };
  }
}

const hexResult = (r: unknown): Hex => {
  if (typeof r !== 'string' || !/^0x[0-9a-fA-F]*$/.test(r)) throw new Error('not hex');
  return r as Hex;
};

/**
 * Reads an ERC-20's facts from a chain's node at one block: the chain id (checked against the configured
 * one), the head when no block was named (the pin is head minus the chain's confirmations plus one), the
 * pinned block's hash and time, the contract code (its keccak256 is the code hash; no code is a 400), then
 * name, symbol, decimals, total supply and each reserve's balance, all at the pinned block. Reading stops at
 * the first of the chain id, head, block or code that cannot be read; what was read is returned.
 */
export async function readToken(
  rpc: RawRpc,
  chain: { name: string; chainId: number; confirmations: number },
  address: string,
  pin: number | null,
  reserves: ReserveSpec[],
): Promise<TokenRead> {
  const readings: Reading[] = [];
  const chainId = reading('chain_id', false, await rpc.call('eth_chainId', []), (r) => Number(hexToBigInt(hexResult(r))));
  readings.push(chainId);
  if (chainId.outcome === 'read' && chainId.value !== chain.chainId) {
    chainId.outcome = 'unavailable';
    chainId.error = `the node configured for chain ${chain.name} serves chain id ${chainId.value}, not ${chain.chainId}`;
  }
  if (chainId.outcome !== 'read') return { readings, block: null };

  let block = pin;
  if (block === null) {
    const head = reading('chain_head', false, await rpc.call('eth_blockNumber', []), (r) => Number(hexToBigInt(hexResult(r))));
    readings.push(head);
    if (head.outcome !== 'read') return { readings, block: null };
    block = Math.max(0, (head.value as number) - (chain.confirmations - 1));
  }
  const tag = blockHex(block);
  const blockAnswer = await rpc.call('eth_getBlockByNumber', [tag, false]);
  if (!blockAnswer.exchange.error && !blockAnswer.rpcError && blockAnswer.result === null) {
    throw invalid(`block_number: block ${block} is ahead of the head of chain ${chain.name}`, 'block_number');
  }
  let pinned: TokenRead['block'] = null;
  const blockReading = reading('block', true, blockAnswer, (r) => {
    const b = r as { hash?: unknown; timestamp?: unknown; number?: unknown };
    if (typeof b?.hash !== 'string' || typeof b.timestamp !== 'string' || hexToBigInt(hexResult(b.number)) !== BigInt(block)) throw new Error('not the block asked for');
    pinned = { number: block, hash: b.hash.toLowerCase(), timestamp: Number(hexToBigInt(hexResult(b.timestamp))) };
    return b.hash.toLowerCase();
  });
  readings.push(blockReading);
  if (blockReading.outcome !== 'read') {
    blockReading.outcome = 'unavailable';
    return { readings, block: null };
  }

  const codeAnswer = await rpc.call('eth_getCode', [address, tag]);
  if (!codeAnswer.exchange.error && !codeAnswer.rpcError && codeAnswer.result === '0x') {
    throw invalid(`subject.address: ${address} holds no contract code on chain ${chain.name} at block ${block}`, 'subject.address');
  }
  const code = reading('code_hash', true, codeAnswer, (r) => keccak256(hexResult(r)));
  readings.push(code);
  if (code.outcome !== 'read') {
    code.outcome = 'unavailable';
    return { readings, block: pinned };
  }

  const call = (to: string, data: string) => rpc.call('eth_call', [{ to, data }, tag]);
  const facts = await Promise.all([
    call(address, SELECTOR.name).then((a) => reading('name', true, a, (r) => decodeText(hexResult(r)))),
    call(address, SELECTOR.symbol).then((a) => reading('symbol', true, a, (r) => decodeText(hexResult(r)))),
    call(address, SELECTOR.decimals).then((a) => reading('decimals', true, a, (r) => Number(decodeUint(hexResult(r), 8)))),
    call(address, SELECTOR.totalSupply).then((a) => reading('total_supply', true, a, (r) => decodeUint(hexResult(r), 256).toString())),
    ...reserves.map((res) =>
      call(res.token ?? address, `${SELECTOR.balanceOf}${pad(res.address)}`).then((a) => reading(`reserve:${res.label}`, true, a, (r) => decodeUint(hexResult(r), 256).toString())),
    ),
  ]);
  readings.push(...facts);
  return { readings, block: pinned };
}
