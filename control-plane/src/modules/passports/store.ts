import { sql, type Kysely, type Selectable } from 'kysely';
import type { DB, PassportHandlesTable, PassportsTable } from '../../db/schema.ts';

export type HandleRow = Selectable<PassportHandlesTable>;
export type PassportRow = Selectable<PassportsTable>;

/** The public directory's cap (spec document 3, Limits). */
export const DIRECTORY_CAP = 500;

/** The passports module's tables: handles (claimed once, never released) and passport versions. */
export class PassportStore {
  constructor(private readonly db: Kysely<DB>) {}

  async handle(handle: string, db: Kysely<DB> = this.db): Promise<HandleRow | undefined> {
    return db.selectFrom('passport_handles').selectAll().where('handle', '=', handle).executeTakeFirst();
  }

  async handleOf(accountId: string, db: Kysely<DB> = this.db): Promise<HandleRow | undefined> {
    return db.selectFrom('passport_handles').selectAll().where('account_id', '=', accountId).executeTakeFirst();
  }

  /**
   * Claims `handle` for the account unless either is taken (the handle's primary key, the account's unique
   * index); never fails on the race, never overwrites. Returns whether this call wrote the row.
   */
  async claim(trx: Kysely<DB>, handle: string, accountId: string, at: Date): Promise<boolean> {
    const r = await trx
      .insertInto('passport_handles')
      .values({ handle, account_id: accountId, claimed_at: at, current_version: 0, verified_runs: 0, receipts: 0, updated_at: at })
      .onConflict((oc) => oc.doNothing())
      .returning('handle')
      .executeTakeFirst();
    return r !== undefined;
  }

  /** The handle row, locked for the rest of the transaction (mints at one handle run one at a time). */
  async lock(trx: Kysely<DB>, handle: string): Promise<HandleRow | undefined> {
    return trx.selectFrom('passport_handles').selectAll().where('handle', '=', handle).forUpdate().executeTakeFirst();
  }

  async insertVersion(trx: Kysely<DB>, row: PassportRow): Promise<void> {
    await trx.insertInto('passports').values(row).execute();
    await trx
      .updateTable('passport_handles')
      .set({ current_version: row.version, verified_runs: row.verified_runs, receipts: row.receipts, updated_at: row.issued_at })
      .where('handle', '=', row.handle)
      .execute();
  }

  /** The current passport at a handle. */
  async current(handle: string, db: Kysely<DB> = this.db): Promise<PassportRow | undefined> {
    return db
      .selectFrom('passport_handles as h')
      .innerJoin('passports as p', (j) => j.onRef('p.handle', '=', 'h.handle').onRef('p.version', '=', 'h.current_version'))
      .selectAll('p')
      .where('h.handle', '=', handle)
      .executeTakeFirst();
  }

  /** Handles with a passport: how many, and the newest minted (for the explorer). */
  async minted(limit: number): Promise<{ count: number; newest: HandleRow[] }> {
    const [c, newest] = await Promise.all([
      this.db.selectFrom('passport_handles').select((eb) => eb.fn.countAll<number>().as('n')).where('current_version', '>', 0).executeTakeFirstOrThrow(),
      this.db.selectFrom('passport_handles').selectAll().where('current_version', '>', 0).orderBy('updated_at', 'desc').orderBy('handle').limit(limit).execute(),
    ]);
    return { count: Number(c.n), newest };
  }

  /** Handles with a passport, ranked by verified runs, then receipts, then handle (byte order); at most DIRECTORY_CAP. */
  async directory(): Promise<HandleRow[]> {
    return this.db
      .selectFrom('passport_handles')
      .selectAll()
      .where('current_version', '>', 0)
      .orderBy('verified_runs', 'desc')
      .orderBy('receipts', 'desc')
      .orderBy(sql`handle collate "C"`)
      .limit(DIRECTORY_CAP)
      .execute();
  }
}
