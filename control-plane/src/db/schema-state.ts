/**
 * Durable state (state module): one row per value, keyed by account, namespace and key. The value is its
 * RFC 8785 canonical JSON, sealed at rest (AES-256-GCM under the seal key, bound to its place and version).
 * `namespace` and `key` compare byte by byte (collation "C"), which is also the listing order.
 */
export interface StateValuesTable {
  account_id: string;
  namespace: string;
  key: string;
  /** Increments by one with every write of the key; a key created anew starts above every version the account deleted. */
  version: number;
  value_sealed: Uint8Array;
  /** Bytes of the canonical JSON (UTF-8). */
  size: number;
  created_at: Date;
  updated_at: Date;
}

/**
 * The highest version of any value the account has deleted: a key created afterwards starts above it, so a
 * version (and ETag) never names two different values of one key, even across a delete and a re-creation.
 */
export interface StateVersionFloorsTable {
  account_id: string;
  version: number;
}
