import type { ColumnType, Generated } from 'kysely';

/** A JSON column: read as T, written as its JSON text. */
type JsonCol<T> = ColumnType<T, string, string>;

/**
 * An autopilot proposal (autopilot module): a cheaper catalog model for one target of the account's metered
 * chat traffic (an engine slug, or a model called directly), evaluated against the current configuration on
 * the account's own eval suites and replay capsules. `evidence` holds costs, pass rates and sample sizes; a
 * proposal whose evidence says regression is refused adoption for everyone.
 */
export interface AutopilotProposalsTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  /** The analysis that made it (one analysis may propose several candidates). */
  analysis_id: string;
  state: 'open' | 'adopted' | 'rejected';
  target_kind: 'engine' | 'model';
  /** The slug (engine) or the catalog model (model). */
  target: string;
  /** The published build evaluated as the current configuration (engine targets). */
  build_id: string | null;
  current_model: string;
  candidate_model: string;
  regression: boolean;
  savings_micro_usd: number;
  evidence: JsonCol<Record<string, unknown>>;
  /** Hex sha256 of the evidence's RFC 8785 canonical JSON. */
  evidence_sha256: string;
  /** The key the evaluation calls were metered under. */
  key_id: string;
  created_at: Date;
  decided_at: Date | null;
  /** The account whose session decided (an org member acting for the account, or its owner). */
  decided_by: string | null;
  /** The engine build version the adoption published. */
  adopted_build_id: string | null;
}
