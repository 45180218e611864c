import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * `nodes.changed_at`: when a node's row was last written (insert or update, by any process: a trigger sets it
 * from the database's clock, so no writer can forget it). The scheduler's view of the registry reads only the
 * rows changed since its last read (with an overlap for transactions that commit late) instead of every row.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table nodes add column changed_at timestamptz not null default now();
    create index nodes_changed_at on nodes (changed_at);
  `);
  await sql`
    create function svc_node_changed() returns trigger language plpgsql as $fn$
    begin
      new.changed_at := clock_timestamp();
      return new;
    end $fn$;
  `.execute(db);
  await runStatements(db, `
    create trigger nodes_changed before insert or update on nodes for each row execute function svc_node_changed();
  `);
}
