import type { Generated } from 'kysely';

/**
 * A replay capsule (replay module): one chat request an account recorded, run once when recorded (its
 * output fingerprint is the baseline) and re-run on demand. The request is sealed (AES-256-GCM, bound to the
 * capsule id) and never returned; deleting nulls it and keeps the content-free row and its history.
 */
export interface ReplayCapsulesTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  /** The API key the recording ran under; replays use it unless they name another. */
  key_id: string;
  /** The model the request names (a catalog model or an engine name). */
  model: string;
  request_sealed: Uint8Array | null;
  /** Hex sha256 of the request's RFC 8785 canonical JSON. */
  request_sha256: string;
  /** The baseline: hex sha256 of the canonical output of the recording run. */
  output_sha256: string;
  /** The recording run's receipt (its request id). */
  receipt_id: string;
  cost_micro_usd: number;
  replay_count: Generated<number>;
  changed_count: Generated<number>;
  last_replayed_at: Date | null;
  created_at: Date;
  deleted_at: Date | null;
}

/** One replay of a capsule: the output fingerprint, whether it differs from the baseline, the receipt. */
export interface ReplayRunsTable {
  id: string;
  seq: Generated<number>;
  capsule_id: string;
  account_id: string;
  key_id: string;
  /** The catalog model that served it, from its receipt. */
  model: string | null;
  output_sha256: string;
  changed: boolean;
  receipt_id: string;
  cost_micro_usd: number;
  created_at: Date;
}
