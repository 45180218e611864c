import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Arena runs under way (arena module): one row per (suite, model) while its run runs, naming the process and
 * holding the tasks done so far; inserted before the first task, replaced by the arena_runs row in the
 * transaction that writes it. A row naming a process that is gone is an interrupted run: it becomes a failed
 * arena_runs row with the tasks it did, and the pair is not run again before its cadence.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table arena_live (
      suite_slug text not null,
      model text not null,
      run_id text not null unique,
      tasks_sha256 text not null,
      tasks_total integer not null,
      runner_account_id text not null,
      key_id text not null,
      process_id text not null,
      results jsonb not null,
      started_at timestamptz not null,
      primary key (suite_slug, model)
    );
  `);
}
