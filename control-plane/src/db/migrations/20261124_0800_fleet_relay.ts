import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Dispatch across control-plane processes (ARCHITECTURE decision 2). `nodes.channel_process` names the
 * process that holds the node's agent channel now (null: no process does); a process that picks a node
 * whose channel another process holds sends it the job over Postgres NOTIFY, and that process relays the
 * job to the agent and its output back. A message too large for a NOTIFY payload waits in `fleet_spill`
 * and the NOTIFY carries its id; the receiving process deletes the row as it reads it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table nodes add column channel_process text;
    create table fleet_spill (
      id bigserial primary key,
      body text not null,
      created_at timestamptz not null default now()
    );
  `);
}
