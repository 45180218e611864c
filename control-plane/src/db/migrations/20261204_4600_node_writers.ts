import { sql, type Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * `nodes.changed_by`: which process last wrote a node's row (the setting `svc.writer`, which every connection of
 * a control-plane process carries set to its process id; the trigger sets it, so no writer can forget it). A process puts
 * each of its own writes into its scheduler view as it commits, so the view's incremental read takes only the rows
 * other processes (or anyone else: a migration, a psql session) changed: none on a single replica.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    alter table nodes add column changed_by text;
  `);
  await sql`
    create or replace function svc_node_changed() returns trigger language plpgsql as $fn$
    begin
      new.changed_at := clock_timestamp();
      new.changed_by := nullif(current_setting('svc.writer', true), '');
      return new;
    end $fn$;
  `.execute(db);
}
