import type { Generated } from 'kysely';

/**
 * A Legacy plan (legacy module): a sealed note and files that go to beneficiaries if the owner stops checking
 * in. The note and every object are sealed at rest (AES-256-GCM under the seal key, bound to the plan and
 * object ids); cancelling nulls every ciphertext and kills the claim tokens in one transaction, and the
 * content-free rows (parties, object metadata, chained events) stay.
 */
export interface LegacyPlansTable {
  id: string;
  /** Insertion order: lists are newest first whatever the clock says. */
  seq: Generated<number>;
  account_id: string;
  name: string;
  status: 'active' | 'warning' | 'released' | 'cancelled';
  checkin_interval_seconds: number;
  grace_seconds: number;
  /** Confirmations of named attesters needed for release; null: no attesters. */
  quorum: number | null;
  deadline_at: Date;
  warned_at: Date | null;
  released_at: Date | null;
  cancelled_at: Date | null;
  last_checkin_at: Date | null;
  note_sealed: Uint8Array | null;
  note_bytes: number;
  /** Bumped by every content replacement; objects carry the version they belong to. */
  content_version: number;
  /** Events chained so far; the next event's seq. */
  event_count: number;
  /** The hash of the last chained event. */
  head_hash: string;
  created_at: Date;
}

export interface LegacyObjectsTable {
  id: string;
  plan_id: string;
  version: number;
  position: number;
  name: string;
  content_type: string;
  byte_len: number;
  /** 0x-hex sha256 of the bytes. */
  sha256: string;
  /** Null once replaced or once the plan is cancelled. */
  content_sealed: Uint8Array | null;
  created_at: Date;
  replaced_at: Date | null;
}

export interface LegacyPartiesTable {
  plan_id: string;
  role: 'beneficiary' | 'attester';
  /** Lowercase 0x-hex EVM address. */
  wallet: string;
  label: string | null;
  position: number;
  /** Beneficiaries: sha256 hex of the claim token; null once killed (plan cancelled). */
  claim_token_hash: string | null;
  /** Attesters: the confirmation counted in the current warning; check-in clears it. */
  confirmed_at: Date | null;
  /** Beneficiaries: the first opening of the released plan. */
  claimed_at: Date | null;
}

/** The plan's hash chain: one row per event, content-free. */
export interface LegacyEventsTable {
  plan_id: string;
  seq: number;
  type: string;
  at: Date;
  /** RFC 8785 canonical JSON of the chained record (its sha256 is `hash`). */
  canonical: string;
  prev_hash: string;
  hash: string;
}
