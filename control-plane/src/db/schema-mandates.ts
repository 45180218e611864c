import type { ColumnType } from 'kysely';

/**
 * Mandates (mandates module): a bounded grant over a delegated sub-key. `canonical` is the signed mandate
 * document (RFC 8785); the gateway's signature and, when the owner co-signed, a linked wallet's are over
 * exactly that text. The bounds are in the document; the columns beside it are what lists and limits read.
 */
export interface MandatesTable {
  id: string;
  account_id: string;
  parent_key_id: string;
  key_id: string;
  canonical: string;
  signature: string;
  signer: string;
  /** Lowercase 0x address of the linked wallet that co-signed, or null. */
  owner_address: string | null;
  owner_signature: string | null;
  spend_cap_micro_usd: number;
  expires_at: Date;
  created_at: Date;
  revoked_at: Date | null;
}

/** Ghost sessions (ghost module): an ephemeral key's metadata, purged when the ghost is destroyed or expires. */
export interface GhostSessionsTable {
  id: string;
  account_id: string;
  key_id: string;
  name: string | null;
  scopes: ColumnType<string[], string, string>;
  spend_cap_micro_usd: number | null;
  created_at: Date;
  expires_at: Date;
}
