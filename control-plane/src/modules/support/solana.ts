import { createSolanaRpc, type Signature } from '@solana/kit';
import { ServiceError } from '@svc/shared';

export interface Raise {
  slot: bigint;
  blockTime: Date | null;
  decimals: number;
  pre: bigint;
  post: bigint;
}

interface TokenBalance {
  mint: string;
  owner?: string | undefined;
  uiTokenAmount: { amount: string; decimals: number };
}

const rejected = (reason: string, message: string) => new ServiceError('transfer_rejected', message, { reason });

/**
 * Reads one transaction over Solana JSON-RPC (`getTransaction`, commitment `finalized`, json encoding) and
 * works out how it changed the balance of `owner` in `mint`: the sum of its token accounts' amounts in
 * `postTokenBalances` minus the same sum in `preTokenBalances` (an account opened by the transaction has no
 * pre entry: zero). Entries are attributed by their `owner` field.
 */
export class SolanaReader {
  private readonly rpc: ReturnType<typeof createSolanaRpc>;

  constructor(rpcUrl: string) {
    this.rpc = createSolanaRpc(rpcUrl);
  }

  async raise(signature: string, owner: string, mint: string): Promise<Raise> {
    let tx;
    try {
      tx = await this.rpc.getTransaction(signature as Signature, { commitment: 'finalized', encoding: 'json', maxSupportedTransactionVersion: 0 }).send();
    } catch (e) {
      throw new ServiceError('upstream_error', `The Solana RPC failed on getTransaction (${(e as Error).name}); nothing was recorded, try again`);
    }
    if (!tx) throw rejected('not_finalized', `Transaction ${signature} is not finalized on the configured cluster (unknown, or not yet finalized); submit it again once it is`);
    const meta = tx.meta;
    if (!meta) throw rejected('no_meta', `The RPC returned transaction ${signature} without its status metadata`);
    if (meta.err !== null) throw rejected('failed', `Transaction ${signature} failed on chain; it moved no tokens`);
    const sum = (list: readonly TokenBalance[] | null | undefined) => {
      let total = 0n;
      let decimals: number | null = null;
      for (const b of list ?? []) {
        if (b.mint !== mint || b.owner !== owner) continue;
        total += BigInt(b.uiTokenAmount.amount);
        decimals = b.uiTokenAmount.decimals;
      }
      return { total, decimals };
    };
    const pre = sum(meta.preTokenBalances as readonly TokenBalance[] | undefined);
    const post = sum(meta.postTokenBalances as readonly TokenBalance[] | undefined);
    if (post.total <= pre.total) {
      throw rejected('balance_not_raised', `Transaction ${signature} did not raise the ${mint} balance of ${owner} (before ${pre.total}, after ${post.total} base units)`);
    }
    return {
      slot: BigInt(tx.slot),
      blockTime: tx.blockTime === null ? null : new Date(Number(tx.blockTime) * 1000),
      decimals: post.decimals ?? pre.decimals ?? 0,
      pre: pre.total,
      post: post.total,
    };
  }
}
