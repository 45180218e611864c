import type { Generated } from 'kysely';

/**
 * A relay (relays module): a sealed temporary share of objects behind a link secret (sha256 stored, the link
 * shown once), with an expiry, an access cap, an optional PIN and a view-only flag. `state` is what the owner
 * or the PIN counter did to it; expiry and the cap are read from the clock and the counters.
 */
export interface RelaysTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  secret_hash: string;
  /** scrypt of the PIN, hex, and its salt; null without a PIN. */
  pin_hash: string | null;
  pin_salt: string | null;
  view_only: boolean;
  max_accesses: number;
  accesses: number;
  failed_pins: number;
  state: 'active' | 'revoked' | 'locked';
  object_count: number;
  total_bytes: number;
  expires_at: Date;
  created_at: Date;
  /** When it was revoked or locked. */
  ended_at: Date | null;
  /** When the objects' ciphertext was nulled (revoked, locked, or found expired). */
  content_destroyed_at: Date | null;
}

/** One object of a relay: metadata and its sealed bytes (null once destroyed). */
export interface RelayObjectsTable {
  id: string;
  relay_id: string;
  position: number;
  name: string;
  content_type: string;
  bytes: number;
  sha256: string;
  content_sealed: Uint8Array | null;
}

/** The short-lived token one access of a relay fetches its objects with (sha256 stored). */
export interface RelayGrantsTable {
  token_hash: string;
  relay_id: string;
  expires_at: Date;
}
