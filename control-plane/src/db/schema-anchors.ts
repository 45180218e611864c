import type { Generated } from 'kysely';

/**
 * Public anchors (anchors module). A leaf is one artifact's 32-byte hash, queued once per (kind, ref, hash);
 * the leader gathers queued leaves in queue order into a batch (an RFC 6962 Merkle tree) and writes its root
 * to each configured chain.
 */
export interface AnchorLeavesTable {
  seq: Generated<number>;
  /** What the hash is of: `run`, `call`, `passport`, `notary`, ... */
  kind: string;
  /** The artifact's id (never public: the anchor document lists hashes only). */
  ref: string;
  /** 0x-hex, 32 bytes. */
  hash: string;
  created_at: Date;
  batch_root: string | null;
  leaf_index: number | null;
}

export interface AnchorBatchesTable {
  root: string;
  leaf_count: number;
  created_at: Date;
}

export type AnchorSubmissionState = 'pending' | 'anchored' | 'failed';

/**
 * One batch root on one chain. The transaction is signed and stored (raw and hash) before it is sent, so a
 * process that dies between the two sends the same transaction again instead of a second one. `nonce` holds
 * what bounds the stored transaction's life: its EVM nonce, or the last block height its Solana blockhash is
 * valid to; `block_number` is the EVM block or the Solana slot.
 */
export interface AnchorSubmissionsTable {
  root: string;
  backend: string;
  type: 'evm' | 'solana';
  /** The EVM chain id; 0 on Solana. */
  chain_id: number;
  state: AnchorSubmissionState;
  from_address: string;
  nonce: number | null;
  raw_tx: string | null;
  tx_hash: string | null;
  block_number: number | null;
  block_hash: string | null;
  attempts: number;
  last_error: string | null;
  next_attempt_at: Date;
  created_at: Date;
  anchored_at: Date | null;
}
