import type { ColumnType, Generated } from 'kysely';

/** A JSON column: read as T, written as its JSON text. */
type JsonCol<T> = ColumnType<T, string, string>;

/**
 * Eval suites (evals module): a model, its cases and their assertions, and the API key of the account that
 * runs it unless a run names another. Deleting a suite deletes its runs and monitors.
 */
export interface EvalSuitesTable {
  id: string;
  /** Insertion order: lists are newest first. */
  seq: Generated<number>;
  account_id: string;
  name: string;
  model: string;
  /** The suite's designated key (a key of the account): runs and monitors use it unless they name one. */
  key_id: string | null;
  /** The default grader of its llm_rubric assertions (the suite's model when null). */
  grader_model: string | null;
  max_tokens: number | null;
  temperature: number | null;
  /** The cases as created (messages, variables, threshold, assertions). */
  cases: JsonCol<unknown[]>;
  created_at: Date;
}

/**
 * One run of a suite (evals module): its rates and per-case results, content-free (no model output, no
 * grader reasoning: those are returned once by the run that made them). A suite keeps its newest 100.
 */
export interface EvalRunsTable {
  id: string;
  seq: Generated<number>;
  eval_id: string;
  account_id: string;
  trigger: 'manual' | 'monitor';
  monitor_id: string | null;
  key_id: string;
  model: string;
  repeat: number;
  case_count: number;
  attempts: number;
  passed_attempts: number;
  pass_rate: number;
  pass_at_n: number;
  pass_hat_n: number;
  wilson_lower: number;
  regression: boolean;
  regressed_cases: JsonCol<number[]>;
  previous_run_id: string | null;
  previous_pass_rate: number | null;
  cost_micro_usd: number;
  results: JsonCol<unknown[]>;
  started_at: Date;
  finished_at: Date;
}

/**
 * Drift monitors (evals module): a suite run on the leader's loop every `interval_seconds` (at least an hour)
 * under `key_id`. `next_run_at` is null exactly while paused. `drifting` is set by a run that fell below the
 * threshold or by more than the drop tolerance below the baseline (which fires eval_drift_detected) and
 * cleared by one that did not.
 */
export interface EvalMonitorsTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  eval_id: string;
  key_id: string;
  state: 'active' | 'paused';
  interval_seconds: number;
  threshold: number;
  drop_tolerance: number;
  repeat: number;
  baseline_rate: number | null;
  baseline_run_id: string | null;
  last_run_id: string | null;
  last_run_at: Date | null;
  last_pass_rate: number | null;
  last_measured_rate: number | null;
  last_error: string | null;
  failure_streak: number;
  drifting: boolean;
  next_run_at: Date | null;
  /** The process running the monitor's current run (null when none runs); a run whose process is gone was interrupted. */
  run_claimed_by: string | null;
  run_started_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * Judge verdicts (judge module): the signed outcome (models, evidence root, votes, tally, fingerprints of
 * question and rationales) and its anchor. Question and rationales are stored only while published, sealed
 * under the seal key; unpublishing nulls both in the statement that sets the state.
 */
export interface JudgeVerdictsTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  key_id: string;
  state: 'unpublished' | 'published';
  models: JsonCol<string[]>;
  options: JsonCol<string[]>;
  evidence_root: string;
  question_sha256: string;
  /** The winning option, or null (a tie, or every juror abstained). */
  outcome: string | null;
  /** The signed outcome: its request id, RFC 8785 canonical payload, hash and EIP-191 signature. */
  receipt_id: string;
  receipt_payload: string;
  receipt_hash: string;
  receipt_signature: string;
  question_sealed: Uint8Array | null;
  rationales_sealed: Uint8Array | null;
  created_at: Date;
  published_at: Date | null;
  unpublished_at: Date | null;
}
