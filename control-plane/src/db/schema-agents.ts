import type { Generated } from 'kysely';

/**
 * Hosted agents (agents module). The code and the agent key's secret are sealed at rest (AES-256-GCM under the
 * seal key, bound to the agent id); the hook token is kept as its sha256 and its HMAC secret sealed. Deleting an
 * agent deletes its row (code and key secret with it), its runs and its mailbox; the key stays, revoked.
 */
export interface AgentsTable {
  id: string;
  account_id: string;
  name: string;
  language: string;
  code_sealed: Uint8Array;
  code_sha256: string;
  code_bytes: number;
  /** The agent's bounded key (keys module, managed_by 'agent') and its secret, sealed; injected into runs. */
  key_id: string;
  key_sealed: Uint8Array;
  timeout_seconds: number;
  network: boolean;
  /** A cron expression (UTC) or null; next_run_at is when the leader's loop runs it next. */
  schedule: string | null;
  next_run_at: Date | null;
  enabled: boolean;
  mailbox_trigger: boolean;
  max_runs_per_hour: number;
  hook_token_hash: string | null;
  hook_created_at: Date | null;
  hook_secret_sealed: Uint8Array | null;
  run_count: Generated<number>;
  last_run_id: string | null;
  last_run_at: Date | null;
  last_run_status: string | null;
  created_at: Date;
  updated_at: Date;
}

export type AgentTrigger = 'manual' | 'schedule' | 'mailbox' | 'hook';
export type AgentRunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'refused';

/** One run of an agent: metadata only. A queued run's input is sealed until a worker claims it, then nulled. */
export interface AgentRunsTable {
  id: string;
  /** Insertion order: lists are newest first, whatever the clock says. */
  seq: Generated<number>;
  agent_id: string;
  account_id: string;
  trigger: AgentTrigger;
  status: AgentRunStatus;
  input_sealed: Uint8Array | null;
  input_bytes: number;
  /** The sandbox run's request id (its usage event, sandbox run record and receipt id). */
  request_id: string;
  cost_micro_usd: number | null;
  exit_code: number | null;
  duration_ms: number | null;
  /** Why a run was refused or failed before its program ran (an error type such as spend_cap_reached). */
  error_type: string | null;
  error_message: string | null;
  receipt_id: string | null;
  receipt_hash: string | null;
  receipt_signature: string | null;
  receipt_canonical: string | null;
  /** The process that claimed a queued run, and until when its claim holds (after: the run counts as interrupted). */
  claimed_by: string | null;
  claim_until: Date | null;
  created_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
}

/** A mailbox message, sealed at rest; read_at set when consumed. */
export interface AgentMessagesTable {
  id: string;
  seq: Generated<number>;
  agent_id: string;
  account_id: string;
  from_agent_id: string | null;
  content_sealed: Uint8Array;
  bytes: number;
  run_id: string | null;
  created_at: Date;
  read_at: Date | null;
}

/** Signatures of hook calls seen within the replay window (a second use of one is a replay). */
export interface AgentHookSignaturesTable {
  agent_id: string;
  signature: string;
  seen_at: Date;
}
