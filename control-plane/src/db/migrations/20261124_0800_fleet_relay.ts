import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Dispatch across control-plane processes (ARCHITECTURE decision 2). `nodes.channel_process` names the
 * process that holds the node's agent channel now (null: no process does); a process that picks a node
 * whose channel another process holds sends it the job, and that process relays the job to the agent and
 * its output back. Messages between processes are rows of `fleet_messages` (the receiving process deletes
 * what it reads); a NOTIFY only wakes the receiver, so a NOTIFY missed while a LISTEN connection reconnects
 * delays a message but does not lose it.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table nodes add column channel_process text;
    create table fleet_messages (
      id bigserial primary key,
      receiver text not null,
      sender text not null,
      body text not null,
      created_at timestamptz not null default now()
    );
    create index fleet_messages_receiver on fleet_messages (receiver, id);
  `);
}
