import type { Generated } from 'kysely';

/** A portfolio submitted to a cohort (benchmarks module); holdings sealed until retention nulls them. */
export interface BenchmarksTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  key_id: string | null;
  cohort: string;
  holdings_sealed: Uint8Array | null;
  /** sha256(salt || canonical holdings), the salt sealed with the holdings. */
  holdings_sha256: string;
  retain_until: Date;
  destroyed_at: Date | null;
  created_at: Date;
}

/**
 * Peer figures released for a cohort over a snapshot of participants: `members` (JSON array of benchmark ids,
 * never shown) and `figures` (JSON, what was released). Reused until enough participants changed.
 */
export interface BenchmarkReleasesTable {
  id: string;
  seq: Generated<number>;
  cohort: string;
  methodology_version: string;
  members: string;
  figures: string;
  participants: number;
  created_at: Date;
}

/** One signed result version of a benchmark, under the methodology it states. */
export interface BenchmarkResultsTable {
  id: string;
  benchmark_id: string;
  version: number;
  methodology_version: string;
  release_id: string | null;
  document: string;
  document_sha256: string;
  signature: string;
  receipt_id: string;
  computed_at: Date;
}
