import type { ColumnType } from 'kysely';

/**
 * Registered third-party MCP servers (mcp module). The URL and the credential are sealed (AES-256-GCM under
 * the seal key, bound to the row's id and column) and never returned; deregistering nulls both ciphertexts
 * and keeps the content-free row, so receipts that name the server still resolve to something.
 */
export interface McpServersTable {
  id: string;
  account_id: string;
  name: string;
  /** base64 of the sealed URL; null once deregistered. */
  url_sealed: string | null;
  /** base64 of the sealed credential; null when none was given, or once deregistered. */
  credential_sealed: string | null;
  /** The header the credential goes in verbatim; null: `Authorization: Bearer <credential>`. */
  credential_header: string | null;
  /** Tool names a call may name (JSON array); null: every tool the upstream lists. */
  allowed_tools: ColumnType<string[] | null, string | null, string | null>;
  /** null: the deployment's default price per call. */
  price_micro_usd_per_call: number | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

/**
 * Sessions of the remote MCP server (/v1/mcp) in stateful mode: bound to the API key that opened them, live
 * while used within the idle window, at most a configured number per key. Rows hold no content.
 */
export interface McpSessionsTable {
  id: string;
  account_id: string;
  key_id: string;
  /** The protocol version the session was initialized with. */
  protocol_version: string | null;
  created_at: Date;
  last_used_at: Date;
}
