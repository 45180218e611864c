import type { ColumnType, Generated } from 'kysely';

/** A JSON column: read as T, written as its JSON text. */
type JsonCol<T> = ColumnType<T, string, string>;

/** One task of an arena run: whether it passed, its receipt (the request id, shared publicly), the output's fingerprint. */
export interface ArenaTaskResult {
  task_id: string;
  passed: boolean;
  receipt_id: string | null;
  output_sha256: string | null;
  cost_micro_usd: number;
  error: { type: string; message: string } | null;
}

/**
 * A run of a declared arena suite against one model by the runner account (arena module), written once it
 * ended: each task a metered chat completion under the runner's key, its receipt shared publicly.
 * `receipted`: every task has a receipt; only such completed runs back leaderboard rows.
 */
export interface ArenaRunsTable {
  id: string;
  seq: Generated<number>;
  suite_slug: string;
  /** The declared tasks' digest when the run ran. */
  tasks_sha256: string;
  model: string;
  runner_account_id: string;
  key_id: string;
  state: 'completed' | 'failed';
  tasks_total: number;
  tasks_passed: number;
  pass_rate: number;
  receipted: boolean;
  cost_micro_usd: number;
  results: JsonCol<ArenaTaskResult[]>;
  /** Why a failed run stopped (a refusal of the runner's key: credit, cap, revocation). */
  error: JsonCol<{ type: string; message: string }> | null;
  started_at: Date;
  finished_at: Date;
}

/** An arena run under way (arena module): the process running it and the tasks done so far. */
export interface ArenaLiveTable {
  suite_slug: string;
  model: string;
  run_id: string;
  tasks_sha256: string;
  tasks_total: number;
  runner_account_id: string;
  key_id: string;
  process_id: string;
  results: JsonCol<ArenaTaskResult[]>;
  started_at: Date;
}
