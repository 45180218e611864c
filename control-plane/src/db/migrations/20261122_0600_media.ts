import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Video jobs (media module). No prompt is stored: the row holds metadata, the open hold (to settle or
 * release it from any process), the signed receipt and provenance manifest once settled, and the rendered
 * file sealed at rest (AES-256-GCM, aad = job id) until it expires or is deleted; destroying content nulls
 * `content_sealed` and leaves the content-free row. `lock_token`/`locked_until` is a short lease so the
 * leader's poll and a caller's cancel never settle or release the same hold twice.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table video_jobs (
      id text primary key,
      account_id text not null references accounts(id),
      key_id text not null,
      request_id text not null unique,
      model text not null,
      provider text not null,
      seconds integer not null,
      max_seconds integer not null,
      price_micro_usd_per_second bigint not null,
      size text not null,
      image_input boolean not null default false,
      upstream_id text,
      status text not null check (status in ('queued', 'running', 'succeeded', 'failed', 'canceled', 'expired')),
      progress integer not null default 0 check (progress between 0 and 100),
      hold jsonb,
      hold_micro_usd bigint not null,
      cost_micro_usd bigint,
      billed boolean not null default false,
      duration_seconds double precision,
      receipt jsonb,
      manifest jsonb,
      manifest_signature text,
      asset_sha256 text,
      content_bytes bigint,
      content_sealed bytea,
      error jsonb,
      lock_token text,
      locked_until timestamptz,
      deadline_at timestamptz not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      completed_at timestamptz,
      expires_at timestamptz,
      content_destroyed_at timestamptz
    );
    create index video_jobs_account on video_jobs (account_id, created_at desc, id desc);
    create index video_jobs_open on video_jobs (updated_at) where status in ('queued', 'running');
    create index video_jobs_expiry on video_jobs (expires_at) where content_sealed is not null;
  `);
}
