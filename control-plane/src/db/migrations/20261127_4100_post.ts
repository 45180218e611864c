import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Agent Post (post module): each account's mail settings (postage, accept policy, allow and block lists of
 * handles) and the messages between passport handles. Subject and body are sealed columns that deleting
 * nulls; the content-free row (parties, thread, size, postage, usage event and receipt) stays.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table post_settings (
      account_id text primary key references accounts(id),
      postage_micro_usd bigint not null check (postage_micro_usd between 0 and 1000000),
      accept_policy text not null check (accept_policy in ('open', 'allowlist', 'closed')),
      allow_list text not null,
      block_list text not null,
      updated_at timestamptz not null
    );
    create table post_messages (
      id text primary key,
      seq bigint generated always as identity,
      thread_id text not null,
      in_reply_to text,
      sender_account_id text not null references accounts(id),
      sender_handle text not null,
      recipient_account_id text not null references accounts(id),
      recipient_handle text not null,
      subject_sealed bytea,
      body_sealed bytea,
      bytes integer not null,
      postage_micro_usd bigint not null,
      usage_event_id text not null,
      receipt_id text not null,
      sent_at timestamptz not null,
      read_at timestamptz,
      deleted_at timestamptz,
      check ((deleted_at is null) = (body_sealed is not null))
    );
    create index post_messages_inbox on post_messages (recipient_account_id, seq desc);
    create index post_messages_outbox on post_messages (sender_account_id, seq desc);
    create index post_messages_thread on post_messages (thread_id, seq);
    create index post_messages_unread on post_messages (recipient_account_id) where read_at is null and deleted_at is null;
  `);
}
