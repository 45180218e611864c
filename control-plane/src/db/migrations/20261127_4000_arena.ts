import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Arena runs (arena module): one row per run of a declared suite against one model by the runner account,
 * written once the run ended, with per-task outcomes and receipt ids (no model output).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table arena_runs (
      id text primary key,
      seq bigint generated always as identity,
      suite_slug text not null,
      tasks_sha256 text not null,
      model text not null,
      runner_account_id text not null,
      key_id text not null,
      state text not null check (state in ('completed', 'failed')),
      tasks_total integer not null,
      tasks_passed integer not null,
      pass_rate double precision not null,
      receipted boolean not null,
      cost_micro_usd bigint not null,
      results jsonb not null,
      error jsonb,
      started_at timestamptz not null,
      finished_at timestamptz not null
    );
    create index arena_runs_pair on arena_runs (suite_slug, model, seq desc);
  `);
}
