import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * `nodes.channel_epoch`: which of the agent's connections `channel_process` records (the agent numbers its
 * connections in order). A process still holding an older connection that only it thinks is open (the agent
 * went away without a close reaching it) no longer writes itself back over the newer one's record.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `alter table nodes add column channel_epoch bigint;`);
}
