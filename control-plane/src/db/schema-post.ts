import type { Generated } from 'kysely';

/** An account's Agent Post settings (post module); an account without a row takes mail from anyone at no postage. */
export interface PostSettingsTable {
  account_id: string;
  /** What a sender pays this account per message, micro-USD (at most $1.00). */
  postage_micro_usd: number;
  accept_policy: 'open' | 'allowlist' | 'closed';
  /** JSON arrays of handles. */
  allow_list: string;
  block_list: string;
  updated_at: Date;
}

/**
 * One message between passport handles (post module). Subject and body are sealed at rest (AES-256-GCM under
 * the seal key, bound to the message id); deleting nulls both and the content-free row stays with its
 * postage, usage event and receipt.
 */
export interface PostMessagesTable {
  id: string;
  seq: Generated<number>;
  thread_id: string;
  in_reply_to: string | null;
  sender_account_id: string;
  sender_handle: string;
  recipient_account_id: string;
  recipient_handle: string;
  subject_sealed: Uint8Array | null;
  body_sealed: Uint8Array | null;
  /** UTF-8 bytes of subject and body together. */
  bytes: number;
  postage_micro_usd: number;
  /** The sender's `post` usage event; its receipt (kind `post`) is fetched by `receipt_id` (the request id). */
  usage_event_id: string;
  receipt_id: string;
  sent_at: Date;
  read_at: Date | null;
  deleted_at: Date | null;
}
