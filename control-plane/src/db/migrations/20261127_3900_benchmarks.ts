import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Portfolio benchmarks (benchmarks module): a submission with its holdings sealed until retention destroys them
 * (the content-free row stays), its signed result versions, and the peer-figure releases of each cohort (the
 * snapshot of participants each was computed over, and what it released).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table benchmarks (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      key_id text,
      cohort text not null,
      holdings_sealed bytea,
      holdings_sha256 text not null,
      retain_until timestamptz not null,
      destroyed_at timestamptz,
      created_at timestamptz not null,
      check ((holdings_sealed is null) = (destroyed_at is not null))
    );
    create index benchmarks_live on benchmarks (cohort, account_id, seq desc) where destroyed_at is null;
    create index benchmarks_due on benchmarks (retain_until) where destroyed_at is null;
    create table benchmark_releases (
      id text primary key,
      seq bigint generated always as identity,
      cohort text not null,
      methodology_version text not null,
      members text not null,
      figures text not null,
      participants integer not null,
      created_at timestamptz not null
    );
    create index benchmark_releases_cohort on benchmark_releases (cohort, seq desc);
    create table benchmark_results (
      id text primary key,
      benchmark_id text not null references benchmarks(id),
      version integer not null check (version >= 1),
      methodology_version text not null,
      release_id text references benchmark_releases(id),
      document text not null,
      document_sha256 text not null,
      signature text not null,
      receipt_id text not null,
      computed_at timestamptz not null,
      unique (benchmark_id, version)
    );
  `);
}
