import { sql, type Kysely } from 'kysely';

/**
 * Runs a script of plain DDL statements one at a time (PGlite's extended protocol takes one statement per
 * query). Statements end with `;` at the end of a line; function bodies go through their own `sql` call.
 */
export async function runStatements(db: Kysely<any>, script: string): Promise<void> {
  for (const stmt of script.split(/;\s*\n/).map((s) => s.trim()).filter(Boolean)) {
    try {
      await sql.raw(stmt).execute(db);
    } catch (e) {
      throw new Error(`${(e as Error).message} in: ${stmt.slice(0, 200)}`);
    }
  }
}
