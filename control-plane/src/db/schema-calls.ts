import type { Generated } from 'kysely';

/**
 * A sealed call (calls module): a commitment to a text, made now and opened later. The text and its 32-byte
 * salt are sealed at rest (AES-256-GCM under the seal key, bound to the call id); withdrawing nulls both in
 * the statement that sets the state, and the content-free row (commitment, receipt) stays.
 */
export interface SealedCallsTable {
  id: string;
  /** Insertion order: lists are newest first, whatever the clock says. */
  seq: Generated<number>;
  account_id: string;
  /** The API key that committed; null for a session. */
  key_id: string | null;
  state: 'committed' | 'revealed' | 'withdrawn';
  /** 0x-hex sha256(salt || utf8(text)). */
  commitment: string;
  text_sealed: Uint8Array | null;
  salt_sealed: Uint8Array | null;
  /** The receipt signed at commit: its id (the request id), RFC 8785 canonical payload, hash and EIP-191 signature. */
  receipt_id: string;
  receipt_payload: string;
  receipt_hash: string;
  receipt_signature: string;
  created_at: Date;
  revealed_at: Date | null;
  withdrawn_at: Date | null;
}
