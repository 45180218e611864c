/** Where one batch root is written: an EVM chain or a Solana cluster. */
export interface AnchorBackend {
  readonly name: string;
  readonly type: 'evm' | 'solana';
  /** The EVM chain id; 0 for Solana. */
  readonly chainId: number;
  /** The account that signs and pays (0x address, or base58). */
  readonly from: string;
  /** Signs (does not send) the anchor transaction of `root`. `validity` is the EVM nonce, or the last block height a Solana blockhash is valid to. */
  sign(root: `0x${string}`): Promise<SignedAnchorTx>;
  /** Sends a signed transaction; one the node already has is not an error. */
  send(raw: string): Promise<void>;
  status(hash: string): Promise<TxStatus>;
  /** Whether a transaction signed with this `validity` can no longer be included (nonce used, blockhash expired). */
  expired(validity: number): Promise<boolean>;
  /** How a third party checks an anchored root here. */
  verify(a: { tx_hash: string | null; block_number: number | null; block_hash: string | null; from: string; root: string }): string;
}

export interface SignedAnchorTx {
  raw: string;
  hash: string;
  validity: number;
}

export type TxStatus =
  | { state: 'confirmed'; blockNumber: number; blockHash: string | null }
  | { state: 'waiting' } // included with too few confirmations, or pending
  | { state: 'reverted'; blockNumber: number }
  | { state: 'unknown' }; // never seen (not sent, or dropped)
