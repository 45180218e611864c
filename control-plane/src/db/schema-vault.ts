import type { Generated } from 'kysely';

/**
 * The private vault (vault module). Columns ending `_sealed` hold AES-256-GCM ciphertext under the seal key,
 * each bound to its row and field (docs/vault.md lists the additional data of each); the rest is plain.
 */
export interface VaultAssetsTable {
  id: string;
  seq: Generated<number>;
  issuer_account_id: string;
  state: 'open' | 'closed';
  name_sealed: Uint8Array;
  asset_class_sealed: Uint8Array;
  description_sealed: Uint8Array | null;
  identifier_sealed: Uint8Array | null;
  jurisdiction_sealed: Uint8Array | null;
  terms_sealed: Uint8Array | null;
  /** The issued amount in micro-USD (decimal text, sealed): the sum of positions and pending claims, always. */
  issued_sealed: Uint8Array;
  /** Events in the asset's hash chain, and the hash of the last (64 zeros before the first). */
  chain_length: number;
  chain_head: string;
  created_at: Date;
  closed_at: Date | null;
}

/** One content-free event of an asset's hash chain; its payload is sealed and only its sha256 is public. */
export interface VaultChainEventsTable {
  asset_id: string;
  /** 1, 2, 3, ... per asset. */
  seq: number;
  type: string;
  at: Date;
  /** 0x sha256 of payload_sealed (the ciphertext bytes as stored). */
  payload_sha256: string;
  prev_hash: string;
  hash: string;
  payload_sealed: Uint8Array;
}

export interface VaultPositionsTable {
  asset_id: string;
  account_id: string;
  amount_sealed: Uint8Array;
  updated_at: Date;
}

export interface VaultTransfersTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  from_account_id: string;
  /** Lower-case 0x address the sender named. */
  to_wallet: string;
  /** The account holding to_wallet: at once, or once its claim is settled. */
  to_account_id: string | null;
  claim_id: string | null;
  amount_sealed: Uint8Array;
  memo_sealed: Uint8Array | null;
  chain_seq: number;
  created_at: Date;
}

export interface VaultClaimsTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  transfer_id: string;
  sender_account_id: string;
  wallet: string;
  amount_sealed: Uint8Array;
  /** sha256 hex of the claim token (shown once). */
  token_hash: string;
  state: 'pending' | 'settled' | 'cancelled';
  created_at: Date;
  settled_at: Date | null;
  settled_account_id: string | null;
  cancelled_at: Date | null;
}

export interface VaultDistributionsTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  /** JSON: amount, basis, allocated, remainder, holder count, memo. */
  details_sealed: Uint8Array;
  chain_seq: number;
  created_at: Date;
}

export interface VaultDistributionAllocationsTable {
  distribution_id: string;
  account_id: string;
  /** JSON: the holder's position at the time and the amount allocated. */
  allocation_sealed: Uint8Array;
}

export interface VaultAttestersTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  role: 'auditor' | 'custodian' | 'appraiser' | 'legal';
  account_id: string | null;
  /** Lower-case 0x address. */
  wallet: string | null;
  created_at: Date;
  revoked_at: Date | null;
}

export interface VaultAttestationsTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  kind: 'statement' | 'nav' | 'reserves';
  /** null: recorded by the issuer (NAV and reserves figures). */
  attester_id: string | null;
  recorded_by_account_id: string;
  /** The gateway-signed document: RFC 8785 canonical JSON, sealed. */
  document_sealed: Uint8Array;
  /** The statement text, or a figure's basis. */
  content_sealed: Uint8Array | null;
  signature: string;
  signer: string;
  chain_seq: number;
  created_at: Date;
}

export interface VaultDocumentsTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  name_sealed: Uint8Array;
  content_type: string;
  size_bytes: number;
  /** 0x sha256 of the document's bytes. */
  sha256: string;
  shared_with_holders: boolean;
  /** Nulled when the document is deleted. */
  content_sealed: Uint8Array | null;
  chain_seq: number;
  created_at: Date;
  deleted_at: Date | null;
}

export interface VaultViewGrantsTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  token_hash: string;
  /** JSON array of scopes. */
  scopes: string;
  label_sealed: Uint8Array | null;
  expires_at: Date;
  created_at: Date;
  revoked_at: Date | null;
}
