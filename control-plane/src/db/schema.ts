import type { ColumnType, Generated } from 'kysely';
import type { Json } from './schema-json.ts';
import type { BalanceAlertsTable, SubscriptionsTable, WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEventsTable, WebhooksTable } from './schema-notifications.ts';
import type { VideoJobsTable } from './schema-media.ts';
import type { BatchLinesTable, BatchesTable, ChunksTable, FileUploadsTable, FilesTable } from './schema-batches.ts';
import type { OrgInvitesTable, OrgMembersTable, OrgsTable } from './schema-orgs.ts';
import type { EscrowClaimsTable } from './schema-escrow.ts'; // escrow claims
import type { SourceSetMembersTable, SourceSetsTable } from './schema-sources.ts';
import type { AnchorBatchesTable, AnchorLeavesTable, AnchorSubmissionsTable } from './schema-anchors.ts';
import type { SealedCallsTable } from './schema-calls.ts'; // sealed calls
import type { VaultAssetsTable, VaultAttestationsTable, VaultAttestersTable, VaultChainEventsTable, VaultClaimsTable, VaultDistributionAllocationsTable, VaultDistributionsTable, VaultDocumentsTable, VaultPositionsTable, VaultTransfersTable, VaultViewGrantsTable } from './schema-vault.ts'; // vault
import type { OAuthAccessTokensTable, OAuthClientsTable, OAuthCodesTable, OAuthConsentsTable, OAuthFamiliesTable, OAuthRefreshTokensTable, OAuthRequestsTable } from './schema-oauth.ts';
import type { PasskeyChallengesTable, PasskeysTable } from './schema-passkeys.ts';
import type { KyaCredentialsTable, PassportHandlesTable, PassportsTable } from './schema-passports.ts'; // passports
import type { GhostSessionsTable, MandatesTable } from './schema-mandates.ts'; // mandates
import type { GuardrailsTable, PoliciesTable } from './schema-guardrails.ts'; // guardrails, policies
import type { EvalMonitorsTable, EvalRunsTable, EvalSuitesTable, JudgeVerdictsTable } from './schema-quality.ts'; // quality
import type { McpServersTable, McpSessionsTable } from './schema-mcp.ts'; // mcp
import type { MemoryChunksTable, MemoryCollectionsTable } from './schema-memory.ts'; // memory
import type { LegacyEventsTable, LegacyObjectsTable, LegacyPartiesTable, LegacyPlansTable } from './schema-legacy.ts'; // legacy plans
import type { StateValuesTable, StateVersionFloorsTable } from './schema-state.ts'; // state
import type { AgentHookSignaturesTable, AgentMessagesTable, AgentRunsTable, AgentsTable } from './schema-agents.ts'; // agents
import type { AttestationEvidenceTable, AttestationRecordsTable } from './schema-attestations.ts'; // attestations
import type { NavAssetsTable, NavRecordsTable } from './schema-nav.ts'; // nav
import type { BenchmarkReleasesTable, BenchmarkResultsTable, BenchmarksTable } from './schema-benchmarks.ts'; // benchmarks
import type { DarkpoolIntentEventsTable, DarkpoolIntentsTable, DarkpoolMatchesTable } from './schema-darkpool.ts'; // dark pool
import type { SupportClaimsTable, SupportNoncesTable } from './schema-support.ts'; // holder support claims
import type { EngineBuildsTable } from './schema-engine.ts'; // engine builds
import type { ServiceCallsTable, ServicesTable } from './schema-services.ts'; // marketplace
import type { PostMessagesTable, PostSettingsTable } from './schema-post.ts'; // agent post
import type { RelayGrantsTable, RelayObjectsTable, RelaysTable } from './schema-relays.ts'; // relays
import type { ReplayCapsulesTable, ReplayRunsTable } from './schema-replay.ts'; // replay capsules
import type { AutopilotProposalsTable } from './schema-autopilot.ts'; // autopilot
import type { ArenaLiveTable, ArenaRunsTable } from './schema-arena.ts'; // arena
export type * from './schema-notifications.ts';
export type * from './schema-media.ts';
export type * from './schema-guardrails.ts'; // guardrails, policies
export type * from './schema-quality.ts'; // quality
export type * from './schema-mcp.ts'; // mcp
export type * from './schema-memory.ts'; // memory
export type * from './schema-legacy.ts'; // legacy plans
export type * from './schema-darkpool.ts'; // dark pool
export type * from './schema-support.ts'; // holder support claims
export type * from './schema-state.ts'; // state
export type * from './schema-agents.ts'; // agents
export type * from './schema-batches.ts';
export type * from './schema-orgs.ts';
export type * from './schema-escrow.ts'; // escrow claims
export type * from './schema-sources.ts';
export type * from './schema-anchors.ts';
export type * from './schema-calls.ts'; // sealed calls
export type * from './schema-oauth.ts';
export type * from './schema-passkeys.ts';
export type * from './schema-passports.ts'; // passports
export type * from './schema-mandates.ts'; // mandates
export type * from './schema-vault.ts'; // vault
export type * from './schema-attestations.ts'; // attestations
export type * from './schema-nav.ts'; // nav
export type * from './schema-benchmarks.ts'; // benchmarks
export type * from './schema-engine.ts'; // engine builds
export type * from './schema-services.ts'; // marketplace
export type * from './schema-post.ts'; // agent post
export type * from './schema-relays.ts'; // relays
export type * from './schema-replay.ts'; // replay capsules
export type * from './schema-autopilot.ts'; // autopilot
export type * from './schema-arena.ts'; // arena

/** Table types. Timestamps are written from the injected clock, never from the database's now(). */
export type { Json } from './schema-json.ts';

/** The keys every replica shares, by fingerprint (key-record.ts): one row. */
export interface GatewayKeysTable {
  id: Generated<boolean>;
  /** EIP-55 address of the receipt signer. */
  signer_address: string;
  /** HMAC-SHA256 of a fixed label under the seal key, first 32 hex digits. */
  seal_fingerprint: string;
  /** Signers this one replaced, oldest first. */
  previous_signers: Json<Array<{ address: string; replaced_at: string }>>;
  recorded_at: Date;
  updated_at: Date;
}

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
  /** A switched session: the org it acts for (account_id is then the org's billing account). */
  org_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** A switched session: the member whose role it carries. */
  acting_account_id: ColumnType<string | null, string | null | undefined, string | null>;
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
  leased_micro_usd: Generated<number>;
  window_start: Date | null;
  window_spent_micro_usd: Generated<number>;
  allowed_models: ColumnType<string[] | null, string | null | undefined, string | null>; // mandates: model allow list (JSON)
  allowed_routes: ColumnType<string[] | null, string | null | undefined, string | null>; // mandates: route allow list (JSON)
  managed_by: ColumnType<'mandate' | 'ghost' | 'agent' | null, 'mandate' | 'ghost' | 'agent' | null | undefined, 'mandate' | 'ghost' | 'agent' | null>; // mandates, ghost sessions, agents: the module whose resource the key is
  policy_id: ColumnType<string | null, string | null | undefined, string | null>; // policies: the policy the key carries
}

export interface CreditAccountsTable {
  account_id: string;
  balance_micro_usd: number;
  held_micro_usd: number;
  leased_micro_usd: Generated<number>;
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

/** A settle answered before it was stored (money/pending-settles.ts): the settle item as svc_settle_many takes it. */
export interface MoneyPendingSettlesTable {
  receipt_id: string;
  /** The order the settles were answered in; they are stored in it. */
  seq: Generated<number>;
  account_id: string;
  owner: string;
  item: string;
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
  lease: Generated<boolean>;
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
  /** The control-plane process holding this node's agent channel now (`Database.processId`); null: none. */
  channel_process: string | null;
  /** The agent's number for that connection (later connections have larger ones); null: an agent that does not number them. */
  channel_epoch: string | number | null;
  /** When the row was last written (set by a trigger from the database's clock on every insert and update). */
  changed_at: Generated<Date>;
  /** The process that last wrote the row (its connection's `svc.writer` setting, by the same trigger); null: none named. */
  changed_by: Generated<string | null>;
}

/** Messages between control-plane processes (fleet/relay.ts); the receiver deletes what it reads. */
export interface FleetMessagesTable {
  id: Generated<number>;
  receiver: string;
  sender: string;
  body: string;
  created_at: Generated<Date>;
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
  /** The control-plane process that dispatched the job and owns its outcome (`Database.processId`). */
  origin_process: string | null;
}

export interface SandboxSessionsTable {
  id: string;
  account_id: string;
  key_id: string | null;
  node_id: string | null;
  /** `lost`: its node no longer holds its container (the agent restarted, or said so); final, like stopped. */
  status: 'starting' | 'running' | 'stopped' | 'failed' | 'lost';
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
  status: 'succeeded' | 'failed' | 'timed_out' | 'canceled' | 'error';
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
  /** The process running an in-progress key's request (null on rows older than the column). */
  process_id: string | null;
  /** When a retry first found that process gone from the database. */
  owner_missed_at: Date | null;
}

export interface DB {
  accounts: AccountsTable;
  wallets: WalletsTable;
  siwe_nonces: SiweNoncesTable;
  sessions: SessionsTable;
  api_keys: ApiKeysTable;
  denylist: DenylistTable;
  health_samples: HealthSamplesTable;
  gateway_keys: GatewayKeysTable;
  credit_accounts: CreditAccountsTable;
  ledger_entries: LedgerEntriesTable;
  holds: HoldsTable;
  money_pending_settles: MoneyPendingSettlesTable;
  usage_events: UsageEventsTable;
  receipts: ReceiptsTable;
  runs: RunsTable;
  nodes: NodesTable;
  jobs: JobsTable;
  fleet_messages: FleetMessagesTable;
  sandbox_sessions: SandboxSessionsTable;
  sandbox_runs: SandboxRunsTable;
  sandbox_snapshots: SandboxSnapshotsTable;
  idempotency_keys: IdempotencyKeysTable;
  billing_deposits: BillingDepositsTable;
  pay_requests: PayRequestsTable;
  webhooks: WebhooksTable;
  webhook_events: WebhookEventsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
  balance_alerts: BalanceAlertsTable;
  subscriptions: SubscriptionsTable;
  video_jobs: VideoJobsTable;
  files: FilesTable;
  file_chunks: ChunksTable;
  file_uploads: FileUploadsTable;
  video_chunks: ChunksTable;
  batches: BatchesTable;
  batch_lines: BatchLinesTable;
  orgs: OrgsTable;
  org_members: OrgMembersTable;
  org_invites: OrgInvitesTable;
  escrow_claims: EscrowClaimsTable; // escrow claims
  source_sets: SourceSetsTable; // source sets
  source_set_members: SourceSetMembersTable; // source sets
  anchor_leaves: AnchorLeavesTable;
  anchor_batches: AnchorBatchesTable;
  anchor_submissions: AnchorSubmissionsTable;
  sealed_calls: SealedCallsTable; // sealed calls
  vault_assets: VaultAssetsTable; // vault
  vault_chain_events: VaultChainEventsTable; // vault
  vault_positions: VaultPositionsTable; // vault
  vault_transfers: VaultTransfersTable; // vault
  vault_claims: VaultClaimsTable; // vault
  vault_distributions: VaultDistributionsTable; // vault
  vault_distribution_allocations: VaultDistributionAllocationsTable; // vault
  vault_attesters: VaultAttestersTable; // vault
  vault_attestations: VaultAttestationsTable; // vault
  vault_documents: VaultDocumentsTable; // vault
  vault_view_grants: VaultViewGrantsTable; // vault
  oauth_clients: OAuthClientsTable;
  oauth_requests: OAuthRequestsTable;
  oauth_consents: OAuthConsentsTable;
  oauth_families: OAuthFamiliesTable;
  oauth_codes: OAuthCodesTable;
  oauth_refresh_tokens: OAuthRefreshTokensTable;
  oauth_access_tokens: OAuthAccessTokensTable;
  passkeys: PasskeysTable;
  passkey_challenges: PasskeyChallengesTable;
  passport_handles: PassportHandlesTable; // passports
  passports: PassportsTable; // passports
  kya_credentials: KyaCredentialsTable; // passports: KYA credentials
  mandates: MandatesTable; // mandates
  ghost_sessions: GhostSessionsTable; // mandates: ghost sessions
  guardrails: GuardrailsTable; // guardrails
  policies: PoliciesTable; // policies
  eval_suites: EvalSuitesTable; // quality
  eval_runs: EvalRunsTable; // quality
  eval_monitors: EvalMonitorsTable; // quality
  judge_verdicts: JudgeVerdictsTable; // quality
  mcp_servers: McpServersTable; // mcp
  mcp_sessions: McpSessionsTable; // mcp
  memory_collections: MemoryCollectionsTable; // memory
  memory_chunks: MemoryChunksTable; // memory
  state_values: StateValuesTable; // state
  state_version_floors: StateVersionFloorsTable; // state
  attestation_records: AttestationRecordsTable; // attestations
  attestation_evidence: AttestationEvidenceTable; // attestations
  nav_assets: NavAssetsTable; // nav
  nav_records: NavRecordsTable; // nav
  benchmarks: BenchmarksTable; // benchmarks
  benchmark_releases: BenchmarkReleasesTable; // benchmarks
  benchmark_results: BenchmarkResultsTable; // benchmarks
  agents: AgentsTable; // agents
  agent_runs: AgentRunsTable; // agents
  agent_messages: AgentMessagesTable; // agents
  agent_hook_signatures: AgentHookSignaturesTable; // agents
  legacy_plans: LegacyPlansTable; // legacy plans
  legacy_objects: LegacyObjectsTable; // legacy plans
  legacy_parties: LegacyPartiesTable; // legacy plans
  legacy_events: LegacyEventsTable; // legacy plans
  darkpool_intents: DarkpoolIntentsTable; // dark pool
  darkpool_intent_events: DarkpoolIntentEventsTable; // dark pool
  darkpool_matches: DarkpoolMatchesTable; // dark pool
  support_nonces: SupportNoncesTable; // holder support claims
  support_claims: SupportClaimsTable; // holder support claims
  engine_builds: EngineBuildsTable; // engine builds
  services: ServicesTable; // marketplace
  service_calls: ServiceCallsTable; // marketplace
  post_settings: PostSettingsTable; // agent post
  post_messages: PostMessagesTable; // agent post
  relays: RelaysTable; // relays
  relay_objects: RelayObjectsTable; // relays
  relay_grants: RelayGrantsTable; // relays
  replay_capsules: ReplayCapsulesTable; // replay capsules
  replay_runs: ReplayRunsTable; // replay capsules
  autopilot_proposals: AutopilotProposalsTable; // autopilot
  arena_runs: ArenaRunsTable; // arena
  arena_live: ArenaLiveTable; // arena
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
