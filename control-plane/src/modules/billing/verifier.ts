import { erc20Abi, parseEventLogs, TransactionReceiptNotFoundError, type Hex, type TransactionReceipt } from 'viem';
import { ServiceError, type ErrorType } from '@svc/shared';
import type { ChainConfig } from '../../config.ts';
import { rpc, type ChainRegistry } from './chains.ts';

/** One ERC-20 Transfer log, decoded. Addresses are lowercase 0x-hex; `amount` is in token base units. */
export interface Transfer {
  txHash: string;
  token: string;
  from: string;
  to: string;
  amount: bigint;
  logIndex: number;
  blockNumber: bigint;
}

export type RejectReason =
  | 'not_found'
  | 'failed'
  | 'no_transfer_from_token'
  | 'wrong_recipient'
  | 'amount_too_low'
  | 'log_not_found'
  | 'predates_request';

export type Verification =
  | ({ status: 'verified'; confirmations: number; required: number } & Transfer)
  | ({ status: 'pending'; confirmations: number; required: number } & Transfer)
  | { status: 'rejected'; reason: RejectReason; message: string; detail: Record<string, unknown> };

export interface VerifyInput {
  chain: ChainConfig;
  txHash: string;
  /** The ERC-20 contract whose Transfer log counts (the chain's USDT, or an invoice's token). */
  token: string;
  recipient: string;
  /** Smallest acceptable amount in base units. */
  minAmount: bigint;
  /** Pin one log of the transaction; otherwise the first log that qualifies. */
  logIndex?: number | undefined;
  /** Reject a transfer whose block is older than this (unix seconds). */
  notBeforeSeconds?: number | undefined;
}

const reject = (reason: RejectReason, message: string, detail: Record<string, unknown> = {}): Verification => ({ status: 'rejected', reason, message, detail });

/**
 * Verifies an ERC-20 transfer over JSON-RPC. Only the receipt's logs count: the Transfer event must be
 * emitted by the expected token contract (addresses compared case-insensitively), whatever the
 * transaction's own `to` was (a router or a multisig pays through a contract). Confirmations are
 * latest block - receipt block + 1.
 */
export class TransferVerifier {
  constructor(private readonly chains: ChainRegistry) {}

  async verify(input: VerifyInput): Promise<Verification> {
    const c = input.chain;
    const client = await this.chains.client(c);
    const hash = input.txHash.toLowerCase() as Hex;
    const token = input.token.toLowerCase();
    const recipient = input.recipient.toLowerCase();

    const receipt = await rpc(c, 'eth_getTransactionReceipt', async (): Promise<TransactionReceipt | null> => {
      try {
        return await client.getTransactionReceipt({ hash });
      } catch (e) {
        if (e instanceof TransactionReceiptNotFoundError) return null;
        throw e;
      }
    });
    if (!receipt) {
      return reject('not_found', `No mined transaction ${hash} on chain ${c.name}; if it was just broadcast, submit it again once it is mined`);
    }
    if (receipt.status !== 'success') return reject('failed', `Transaction ${hash} reverted on chain ${c.name}; it moved no tokens`);

    const fromToken = parseEventLogs({ abi: erc20Abi, eventName: 'Transfer', logs: receipt.logs, strict: true }).filter(
      (l) => !l.removed && l.address.toLowerCase() === token,
    );
    const transfers: Transfer[] = fromToken.map((l) => ({
      txHash: hash,
      token,
      from: l.args.from.toLowerCase(),
      to: l.args.to.toLowerCase(),
      amount: l.args.value,
      logIndex: l.logIndex,
      blockNumber: receipt.blockNumber,
    }));
    let candidates = transfers;
    if (input.logIndex !== undefined) {
      candidates = transfers.filter((t) => t.logIndex === input.logIndex);
      if (candidates.length === 0) {
        return reject('log_not_found', `Log ${input.logIndex} of transaction ${hash} is not a Transfer of token ${token}`, { log_index: input.logIndex, token });
      }
    }
    if (candidates.length === 0) {
      return reject('no_transfer_from_token', `Transaction ${hash} contains no Transfer of token ${token} on chain ${c.name}`, { token });
    }
    const toRecipient = candidates.filter((t) => t.to === recipient);
    if (toRecipient.length === 0) {
      return reject('wrong_recipient', `Transaction ${hash} transfers token ${token} to ${candidates[0]!.to}, not to ${recipient}`, {
        expected_recipient: recipient,
        actual_recipient: candidates[0]!.to,
      });
    }
    const chosen = toRecipient.find((t) => t.amount >= input.minAmount);
    if (!chosen) {
      const best = toRecipient.reduce((a, b) => (b.amount > a.amount ? b : a));
      return reject('amount_too_low', `Transaction ${hash} transfers ${best.amount} base units to ${recipient}; at least ${input.minAmount} are required`, {
        amount: best.amount.toString(),
        required_amount: input.minAmount.toString(),
      });
    }
    if (input.notBeforeSeconds !== undefined) {
      const block = await rpc(c, 'eth_getBlockByNumber', () => client.getBlock({ blockNumber: receipt.blockNumber }));
      if (Number(block.timestamp) < input.notBeforeSeconds) {
        return reject('predates_request', `Transaction ${hash} was mined at ${new Date(Number(block.timestamp) * 1000).toISOString()}, before the request existed`, {
          block_time: new Date(Number(block.timestamp) * 1000).toISOString(),
        });
      }
    }
    const latest = await rpc(c, 'eth_blockNumber', () => client.getBlockNumber({ cacheTime: 0 }));
    const confirmations = latest >= receipt.blockNumber ? Number(latest - receipt.blockNumber + 1n) : 0;
    const status = confirmations >= c.confirmations ? 'verified' : 'pending';
    return { status, confirmations, required: c.confirmations, ...chosen };
  }
}

/** A verifier rejection as the HTTP error: 422 `transfer_rejected`, with the reason. */
export function transferRejected(v: Extract<Verification, { status: 'rejected' }> | { reason: string; message: string; detail?: Record<string, unknown> }): ServiceError {
  return new ServiceError('transfer_rejected', `Transfer rejected (${v.reason}): ${v.message}`, { reason: v.reason, ...(v.detail ?? {}) });
}
