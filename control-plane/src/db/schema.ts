import type { ColumnType, Generated } from 'kysely';

/** Table types. Timestamps are written from the injected clock, never from the database's now(). */
type Json<T> = ColumnType<T, string, string>;

export interface AccountsTable {
  id: string;
  created_at: Date;
  suspended_at: Date | null;
  suspended_reason: string | null;
}

export interface WalletsTable {
  address: string; // lowercase 0x-hex
  account_id: string;
  linked_at: Date;
}

export interface SiweNoncesTable {
  nonce: string;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}

export interface SessionsTable {
  id: string;
  token_hash: string;
  account_id: string;
  wallet_address: string | null;
  created_at: Date;
  expires_at: Date;
  last_seen_at: Date;
  revoked_at: Date | null;
  user_agent: string | null;
}

export interface ApiKeysTable {
  id: string;
  account_id: string;
  parent_id: string | null;
  name: string | null;
  prefix: string;
  secret_hash: string;
  scopes: Json<string[]>;
  spend_cap_micro_usd: number | null;
  spent_micro_usd: Generated<number>;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  frozen_at: Date | null;
  frozen_reason: string | null;
  rotated_to: string | null;
  last_used_at: Date | null;
  held_micro_usd: Generated<number>;
  window_start: Date | null;
  window_spent_micro_usd: Generated<number>;
}

export interface CreditAccountsTable {
  account_id: string;
  balance_micro_usd: number;
  held_micro_usd: number;
  updated_at: Date;
}

export interface LedgerEntriesTable {
  id: Generated<number>;
  account_id: string;
  amount_micro_usd: number;
  kind: string;
  ref: string | null;
  balance_after_micro_usd: number;
  created_at: Date;
}

export interface HoldsTable {
  id: string;
  account_id: string;
  key_chain: string[];
  amount_micro_usd: number;
  request_id: string;
  created_at: Date;
  expires_at: Date;
}

export interface UsageEventsTable {
  n: Generated<number>;
  id: string;
  account_id: string;
  key_id: string | null;
  request_id: string;
  kind: string;
  route: string;
  model: string | null;
  units: Json<Record<string, number | string>>;
  cost_micro_usd: number;
  run_id: string | null;
  receipt_id: string;
  created_at: Date;
}

export interface ReceiptsTable {
  id: string;
  account_id: string;
  usage_event_id: string;
  kind: string;
  payload: string;
  hash: string;
  signature: string;
  run_id: string | null;
  run_seq: number | null;
  prev_hash: string | null;
  shared_at: Date | null;
  created_at: Date;
}

export interface RunsTable {
  account_id: string;
  id: string;
  head_hash: string;
  receipt_count: number;
  total_cost_micro_usd: number;
  first_at: Date;
  last_at: Date;
}


export interface DenylistTable {
  sha256: string;
  reason: string | null;
  created_at: Date;
}

export interface HealthSamplesTable {
  id: Generated<number>;
  at: Date;
  ok: boolean;
  db_ms: number;
  process_id: string;
}

export interface NodesTable {
  id: string;
  account_id: string;
  name: string | null;
  house: Generated<boolean>;
  kinds: Json<string[]>;
  models: Json<string[]>;
  model_map: Json<Record<string, string>>;
  declared_speed_factor: number;
  speed_factor: number;
  clamp_count: Generated<number>;
  key_hash: string;
  key_prefix: string;
  approved: Generated<boolean>;
  disabled: Generated<boolean>;
  draining: Generated<boolean>;
  endpoint: string | null;
  capabilities: Json<unknown> | null;
  running_jobs: Generated<number>;
  agent_version: string | null;
  last_heartbeat_at: Date | null;
  dispatched: Generated<number>;
  succeeded: Generated<number>;
  failed: Generated<number>;
  latency_ms: number | null;
  observed_speed: number | null;
  created_at: Date;
  revoked_at: Date | null;
}

export interface JobsTable {
  id: string;
  node_id: string | null;
  account_id: string | null;
  kind: string;
  status: 'queued' | 'dispatched' | 'running' | 'succeeded' | 'failed' | 'canceled' | 'timed_out';
  attempts: Generated<number>;
  error: string | null;
  created_at: Date;
  dispatched_at: Date | null;
  ended_at: Date | null;
}

export interface SandboxSessionsTable {
  id: string;
  account_id: string;
  key_id: string | null;
  node_id: string | null;
  status: 'starting' | 'running' | 'stopped' | 'failed';
  network: boolean;
  idle_timeout_seconds: number;
  snapshot_id: string | null;
  image_digest: string | null;
  exec_count: Generated<number>;
  cost_micro_usd: Generated<number>;
  created_at: Date;
  last_active_at: Date;
  stopped_at: Date | null;
}

export interface SandboxRunsTable {
  id: string;
  account_id: string;
  key_id: string | null;
  session_id: string | null;
  node_id: string | null;
  language: string;
  network: boolean;
  status: 'succeeded' | 'failed' | 'timed_out' | 'error';
  exit_code: number | null;
  timed_out: boolean;
  oom_killed: boolean;
  duration_ms: number | null;
  stdout_bytes: number | null;
  stderr_bytes: number | null;
  cost_micro_usd: number;
  image_digest: string | null;
  receipt_id: string | null;
  created_at: Date;
}

export interface SandboxSnapshotsTable {
  id: string;
  account_id: string;
  session_id: string;
  node_id: string;
  bytes: number;
  sha256: string;
  created_at: Date;
  deleted_at: Date | null;
}

export interface IdempotencyKeysTable {
  account_id: string;
  route: string;
  key: string;
  body_sha256: string;
  state: 'in_progress' | 'done';
  status_code: number | null;
  response: Json<unknown> | null;
  headers: Json<Record<string, string>> | null;
  created_at: Date;
}

export interface DB {
  accounts: AccountsTable;
  wallets: WalletsTable;
  siwe_nonces: SiweNoncesTable;
  sessions: SessionsTable;
  api_keys: ApiKeysTable;
  denylist: DenylistTable;
  health_samples: HealthSamplesTable;
  credit_accounts: CreditAccountsTable;
  ledger_entries: LedgerEntriesTable;
  holds: HoldsTable;
  usage_events: UsageEventsTable;
  receipts: ReceiptsTable;
  runs: RunsTable;
  nodes: NodesTable;
  jobs: JobsTable;
  sandbox_sessions: SandboxSessionsTable;
  sandbox_runs: SandboxRunsTable;
  sandbox_snapshots: SandboxSnapshotsTable;
  idempotency_keys: IdempotencyKeysTable;
  billing_deposits: BillingDepositsTable;
  pay_requests: PayRequestsTable;
}

/** On-chain deposits (billing module): one row per Transfer log; amounts in base units are decimal strings. */
export interface BillingDepositsTable {
  id: string;
  account_id: string;
  chain: string;
  chain_id: number;
  tx_hash: string;
  log_index: number;
  from_address: string;
  to_address: string;
  token: string;
  amount: string;
  decimals: number;
  amount_micro_usd: number;
  block_number: number;
  confirmations: number;
  required_confirmations: number;
  status: 'pending' | 'credited' | 'rejected';
  reason: string | null;
  created_at: Date;
  updated_at: Date;
  credited_at: Date | null;
}

/** Payment requests (pay module): signed invoices settled by a transfer to the payee. */
export interface PayRequestsTable {
  id: string;
  account_id: string;
  key_id: string;
  chain: string;
  chain_id: number;
  token: string;
  decimals: number;
  payee: string;
  amount: string;
  amount_micro_usd: number;
  memo: string | null;
  invoice: string;
  invoice_signature: string;
  status: 'open' | 'settled';
  created_at: Date;
  expires_at: Date;
  settle_tx_hash: string | null;
  settle_log_index: number | null;
  settle_from: string | null;
  settle_amount: string | null;
  settle_block: number | null;
  settle_confirmations: number | null;
  settled_at: Date | null;
  settlement: string | null;
  settlement_signature: string | null;
}

// ---- webhooks, balance alerts, subscriptions (issue 4, items 3-5): begin --------------------------------
/** Interface merging adds these tables to DB above, so this block stays appended. */
export interface DB {
  webhooks: WebhooksTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  balance_alerts: BalanceAlertsTable;
  subscriptions: SubscriptionsTable;
}

/** Webhook endpoints (webhooks module); the signing secret is sealed (AES-256-GCM, aad = webhook id), base64. */
export interface WebhooksTable {
  id: string;
  account_id: string;
  url: string;
  /** Event types delivered; null means every event. */
  events: Json<string[]> | null;
  description: string | null;
  secret_sealed: string;
  enabled: Generated<boolean>;
  created_at: Date;
  disabled_at: Date | null;
}

/** The outbox: one row per emitted event. */
export interface WebhookEventsTable {
  id: string;
  account_id: string;
  type: string;
  data: Json<Record<string, unknown>>;
  created_at: Date;
}

/** One row per (event, webhook); sent by the leader's loop, retried on a schedule. */
export interface WebhookDeliveriesTable {
  id: string;
  event_id: string;
  webhook_id: string;
  status: 'pending' | 'delivered' | 'failed' | 'canceled';
  attempts: Generated<number>;
  next_attempt_at: Date | null;
  claim_token: string | null;
  claimed_until: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Every delivery attempt (the deliveries route lists the last 50 of a webhook). */
export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  at: Date;
}

/** The `balance_low` threshold of an account (alerts module); null means the deployment default. */
export interface BalanceAlertsTable {
  account_id: string;
  threshold_micro_usd: number | null;
  armed: boolean;
  fired_at: Date | null;
  updated_at: Date;
}

/** An account's plan (subscriptions module); no row means Free. */
export interface SubscriptionsTable {
  account_id: string;
  plan_id: string;
  period_start: Date;
  /** End of the paid period; null on Free. */
  period_end: Date | null;
  auto_renew: boolean;
  /** A plan change that takes effect at period_end (a switch to a plan that costs no more). */
  scheduled_plan_id: string | null;
  fee_micro_usd: Generated<number>;
  created_at: Date;
  updated_at: Date;
}
// ---- webhooks, balance alerts, subscriptions (issue 4, items 3-5): end ----------------------------------

// ---- media: video jobs: begin ---------------------------------------------------------------------------
export interface DB {
  video_jobs: VideoJobsTable;
}

/** Video jobs (media module); no prompt is stored. `content_sealed` is the sealed file (aad = job id) until destroyed. */
export interface VideoJobsTable {
  id: string;
  account_id: string;
  key_id: string;
  request_id: string;
  model: string;
  provider: string;
  seconds: number;
  max_seconds: number;
  price_micro_usd_per_second: number;
  size: string;
  image_input: Generated<boolean>;
  upstream_id: string | null;
  status: 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled' | 'expired';
  progress: Generated<number>;
  /** The open hold (money module's Hold), null once settled or released. */
  hold: Json<Record<string, unknown>> | null;
  hold_micro_usd: number;
  cost_micro_usd: number | null;
  billed: Generated<boolean>;
  duration_seconds: number | null;
  /** The signed receipt: {payload, canonical, hash, signature}. */
  receipt: Json<Record<string, unknown>> | null;
  manifest: Json<Record<string, unknown>> | null;
  manifest_signature: string | null;
  asset_sha256: string | null;
  content_bytes: number | null;
  content_sealed: Uint8Array | null;
  error: Json<{ type: string; message: string }> | null;
  lock_token: string | null;
  locked_until: Date | null;
  deadline_at: Date;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  expires_at: Date | null;
  content_destroyed_at: Date | null;
}
// ---- media: video jobs: end -----------------------------------------------------------------------------

// ---- files and batches: begin -------------------------------------------------------------------------
/** Interface merging adds these tables to DB above, so this block stays appended. */
export interface DB {
  files: FilesTable;
  batches: BatchesTable;
  batch_lines: BatchLinesTable;
}

/** Uploaded and batch-written files (files module); `content` is sealed (aad = id), null once destroyed. */
export interface FilesTable {
  n: Generated<number>;
  id: string;
  account_id: string;
  key_id: string | null;
  purpose: 'batch' | 'batch_output';
  filename: string;
  bytes: number;
  /** Batch input: line count and the distinct line urls, checked against a batch's endpoint. */
  lines: number | null;
  endpoints: Json<string[]> | null;
  content: Uint8Array | null;
  /** The batch this input feeds (one batch per file), or the batch that wrote this output. */
  batch_id: string | null;
  created_at: Date;
  expires_at: Date;
  content_destroyed_at: Date | null;
  content_destroyed_reason: 'deleted' | 'expired' | 'batch_ended' | null;
  deleted_at: Date | null;
}

export type BatchStatus = 'validating' | 'in_progress' | 'finalizing' | 'completed' | 'failed' | 'expired' | 'cancelling' | 'cancelled';

/** Batches (batches module): run under the key that created them, line by line, on the leader's loop. */
export interface BatchesTable {
  n: Generated<number>;
  id: string;
  account_id: string;
  key_id: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  metadata: Json<Record<string, string>> | null;
  errors: Json<Array<{ code: string; message: string; param: string | null; line: number | null }>> | null;
  total: number;
  completed: Generated<number>;
  failed: Generated<number>;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: Date;
  expires_at: Date;
  in_progress_at: Date | null;
  finalizing_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  expired_at: Date | null;
  cancelling_at: Date | null;
  cancelled_at: Date | null;
}

/** One row per claimed line while its batch runs (deleted when it ends); `output` is the sealed answer (aad = request id). */
export interface BatchLinesTable {
  batch_id: string;
  line: number;
  custom_id: string;
  request_id: string;
  attempt: Generated<number>;
  status: 'running' | 'succeeded' | 'failed';
  status_code: number | null;
  output: Uint8Array | null;
  claimed_at: Date;
  ended_at: Date | null;
}
// ---- files and batches: end ---------------------------------------------------------------------------
