import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * `jobs.origin_process`: the control-plane process that dispatched the job and owns its outcome. An agent that
 * reconnects mid-job to a process that neither dispatched nor relayed the job finds the job's origin here,
 * and that process relays the job from then on instead of cancelling it as an orphan.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `alter table jobs add column origin_process text;`);
}
