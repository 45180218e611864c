import type { Generated } from 'kysely';

/**
 * Source sets (sources module): fingerprints of the sources a call drew on, and their ordered root. A set
 * taken down keeps this row (content-free: id, account, root, count, times) and loses its members.
 */
export interface SourceSetsTable {
  id: string;
  /** Insertion order: lists are newest first, however close together sets were registered. */
  seq: Generated<number>;
  account_id: string;
  /** The ordered root (64 lowercase hex) computed at registration; `root_recomputes` compares the members to it. */
  root: string;
  member_count: number;
  created_at: Date;
  deleted_at: Date | null;
}

/** One member, at its place in root order (`position` from 0). */
export interface SourceSetMembersTable {
  set_id: string;
  position: number;
  label: string;
  /** 64 lowercase hex. */
  sha256: string;
  byte_len: number;
}
