import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Quality (evals and judge modules): eval suites with their runs and drift monitors, and judge verdicts.
 * A verdict's question and rationales are sealed columns present exactly while it is published.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table eval_suites (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      name text not null,
      model text not null,
      key_id text,
      grader_model text,
      max_tokens integer,
      temperature double precision,
      cases jsonb not null,
      created_at timestamptz not null
    );
    create index eval_suites_account on eval_suites (account_id, seq desc);
    create table eval_runs (
      id text primary key,
      seq bigserial unique,
      eval_id text not null references eval_suites(id) on delete cascade,
      account_id text not null references accounts(id),
      trigger text not null check (trigger in ('manual', 'monitor')),
      monitor_id text,
      key_id text not null,
      model text not null,
      repeat integer not null check (repeat >= 1),
      case_count integer not null,
      attempts integer not null,
      passed_attempts integer not null,
      pass_rate double precision not null,
      pass_at_n double precision not null,
      pass_hat_n double precision not null,
      wilson_lower double precision not null,
      regression boolean not null,
      regressed_cases jsonb not null,
      previous_run_id text,
      previous_pass_rate double precision,
      cost_micro_usd bigint not null,
      results jsonb not null,
      started_at timestamptz not null,
      finished_at timestamptz not null
    );
    create index eval_runs_suite on eval_runs (eval_id, seq desc);
    create table eval_monitors (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      eval_id text not null references eval_suites(id) on delete cascade,
      key_id text not null,
      state text not null check (state in ('active', 'paused')),
      interval_seconds integer not null check (interval_seconds >= 3600),
      threshold double precision not null check (threshold >= 0 and threshold <= 1),
      drop_tolerance double precision not null check (drop_tolerance >= 0 and drop_tolerance <= 1),
      repeat integer not null check (repeat >= 1),
      baseline_rate double precision,
      baseline_run_id text,
      last_run_id text,
      last_run_at timestamptz,
      last_pass_rate double precision,
      last_measured_rate double precision,
      last_error text,
      failure_streak integer not null default 0,
      drifting boolean not null default false,
      next_run_at timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      check ((state = 'active') = (next_run_at is not null))
    );
    create index eval_monitors_account on eval_monitors (account_id, seq desc);
    create index eval_monitors_due on eval_monitors (next_run_at) where state = 'active';
    create table judge_verdicts (
      id text primary key,
      seq bigserial unique,
      account_id text not null references accounts(id),
      key_id text not null,
      state text not null check (state in ('unpublished', 'published')),
      models jsonb not null,
      options jsonb not null,
      evidence_root text not null,
      question_sha256 text not null,
      outcome text,
      receipt_id text not null unique,
      receipt_payload text not null,
      receipt_hash text not null,
      receipt_signature text not null,
      question_sealed bytea,
      rationales_sealed bytea,
      created_at timestamptz not null,
      published_at timestamptz,
      unpublished_at timestamptz,
      check ((state = 'published') = (question_sealed is not null and rationales_sealed is not null))
    );
    create index judge_verdicts_account on judge_verdicts (account_id, seq desc);
  `);
}
