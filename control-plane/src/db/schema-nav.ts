import type { Generated } from 'kysely';

/** An asset id of the NAV module, held by the account that first calculated it. */
export interface NavAssetsTable {
  asset_id: string;
  account_id: string;
  created_at: Date;
}

/**
 * One signed NAV version (nav module): the RFC 8785 document and its EIP-191 signature, the book it was
 * computed from sealed (AES-256-GCM under the seal key, bound to the record id), and when it was published.
 */
export interface NavRecordsTable {
  id: string;
  seq: Generated<number>;
  asset_id: string;
  account_id: string;
  key_id: string | null;
  version: number;
  status_at_calculation: 'VERIFIED' | 'STALE' | 'UNAVAILABLE';
  document: string;
  document_sha256: string;
  signature: string;
  book_sealed: Uint8Array;
  receipt_id: string;
  computed_at: Date;
  fresh_until: Date;
  published_at: Date | null;
}
