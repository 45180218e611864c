import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Files and batches. A file's content is sealed (AES-256-GCM, aad = file id) in `content`; destroying it
 * nulls the column in the same statement that records why, and the content-free row stays. A batch line is
 * claimed by inserting its `batch_lines` row (primary key batch + line, so one claimer wins) with the request
 * id its hold, usage event and receipt will carry; the response is stored sealed before the charge settles.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table files (
      n bigserial unique,
      id text primary key,
      account_id text not null references accounts(id),
      key_id text,
      purpose text not null check (purpose in ('batch', 'batch_output')),
      filename text not null,
      bytes bigint not null,
      lines integer,
      endpoints jsonb,
      content bytea,
      batch_id text,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      content_destroyed_at timestamptz,
      content_destroyed_reason text check (content_destroyed_reason in ('deleted', 'expired', 'batch_ended')),
      deleted_at timestamptz
    );
    create index files_account on files (account_id, n);
    create index files_expiry on files (expires_at) where content is not null;
    create table batches (
      n bigserial unique,
      id text primary key,
      account_id text not null references accounts(id),
      key_id text not null,
      endpoint text not null,
      input_file_id text not null references files(id),
      completion_window text not null,
      status text not null check (status in ('validating', 'in_progress', 'finalizing', 'completed', 'failed', 'expired', 'cancelling', 'cancelled')),
      metadata jsonb,
      errors jsonb,
      total integer not null,
      completed integer not null default 0,
      failed integer not null default 0,
      output_file_id text references files(id),
      error_file_id text references files(id),
      created_at timestamptz not null,
      expires_at timestamptz not null,
      in_progress_at timestamptz,
      finalizing_at timestamptz,
      completed_at timestamptz,
      failed_at timestamptz,
      expired_at timestamptz,
      cancelling_at timestamptz,
      cancelled_at timestamptz
    );
    create index batches_account on batches (account_id, n);
    create index batches_active on batches (n) where status in ('validating', 'in_progress', 'cancelling');
    create table batch_lines (
      batch_id text not null references batches(id),
      line integer not null,
      custom_id text not null,
      request_id text not null unique,
      attempt integer not null default 1,
      status text not null check (status in ('running', 'succeeded', 'failed')),
      status_code integer,
      output bytea,
      claimed_at timestamptz not null,
      ended_at timestamptz,
      primary key (batch_id, line)
    );
    create index batch_lines_running on batch_lines (batch_id) where status = 'running';
  `);
}
