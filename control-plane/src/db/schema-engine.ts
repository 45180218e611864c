import type { ColumnType, Generated } from 'kysely';

/** A JSON column: read as T, written as its JSON text. */
type JsonCol<T> = ColumnType<T, string, string>;

/** The parameters an engine build sends with every call (absent: the caller's, or the model's default). */
export interface EngineParameters {
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  tools?: unknown[];
  tool_choice?: unknown;
}

/**
 * One version of an engine build (engine module): a named configuration of an account, called as
 * `engine/<slug>`. The system prompt is sealed (AES-256-GCM, bound to the build id); its sha256 and the
 * canonical spec (RFC 8785, the prompt's digest and never its text) stay when the prompt is destroyed.
 * At most one version of a slug is published (a partial unique index); publishing another retires it.
 */
export interface EngineBuildsTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  slug: string;
  /** 1, 2, ... per (account, slug), in drafting order. */
  version: number;
  state: 'draft' | 'published' | 'retired';
  model: string;
  parameters: JsonCol<EngineParameters>;
  system_prompt_sealed: Uint8Array | null;
  /** Hex sha256 of the prompt's UTF-8 bytes; null for a build without a system prompt. */
  system_prompt_sha256: string | null;
  /** The guardrail policy the build's calls run under (policies module), with its digest when drafted. */
  policy_id: string | null;
  policy_sha256: string | null;
  spec_canonical: string;
  spec_sha256: string;
  /** `api`: drafted by a caller; `autopilot`: an adopted proposal. */
  origin: 'api' | 'autopilot';
  proposal_id: string | null;
  created_at: Date;
  published_at: Date | null;
  retired_at: Date | null;
  /** When the sealed prompt was destroyed (DELETE); the row, its hashes and spec stay. */
  deleted_at: Date | null;
}
