import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Drift monitors (evals module): the process running a monitor's current run, set in the statement that
 * takes the due run. A claim naming a process that is gone is a run interrupted by that process's death,
 * recorded as such by the next pass, never run again.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table eval_monitors add column run_claimed_by text, add column run_started_at timestamptz;
    create index eval_monitors_claimed on eval_monitors (run_claimed_by) where run_claimed_by is not null;
  `);
}
