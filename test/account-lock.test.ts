import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockAccountRow } from '../control-plane/src/modules/identity/account-lock.ts';
import type { DB } from '../control-plane/src/db/schema.ts';
import { TEST_DB_KIND, freshDatabase, type TestDatabase } from './support/database.ts';

/**
 * The account lock between concurrent transactions on the Postgres server (the embedded database runs one
 * transaction at a time). A send of Agent Post held both accounts' locks and waited for the sender's credit row,
 * while another send's hold held that row and inserted its own: with the lock taken FOR UPDATE, the insert's
 * foreign-key check waited on the account and Postgres ended one of them as a deadlock (a 500).
 */
describe.runIf(TEST_DB_KIND === 'postgres')('the account lock', () => {
  let dbh: TestDatabase;
  let pool: pg.Pool;
  let db: Kysely<DB>;
  const account = 'acct_lock_probe';

  beforeAll(async () => {
    dbh = await freshDatabase();
    pool = new pg.Pool({ connectionString: dbh.url, max: 4 });
    db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    await db.insertInto('accounts').values({ id: account, created_at: new Date(), suspended_at: null, suspended_reason: null }).execute();
  });
  afterAll(async () => {
    await db?.destroy();
    await dbh?.drop();
  });

  /** Runs `work` while another transaction holds the account's lock, then lets that one go. */
  async function whileLocked<T>(work: () => Promise<T>): Promise<T> {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const held = new Promise<void>((r) => (locked = r));
    const holder = db.transaction().execute(async (trx) => {
      expect(await lockAccountRow(trx, account)).toBe(true);
      locked();
      await gate;
    });
    await held;
    try {
      return await work();
    } finally {
      release();
      await holder;
    }
  }

  it('lets another transaction insert a row that references the locked account', async () => {
    const address = `0x${'ab'.repeat(20)}`;
    await whileLocked(() =>
      db.transaction().execute(async (trx) => {
        await sql`set local lock_timeout = '5s'`.execute(trx); // FOR UPDATE would hold this insert's key check until the lock goes
        await trx.insertInto('wallets').values({ address, account_id: account, linked_at: new Date() }).execute();
      }),
    );
    expect(await db.selectFrom('wallets').select('account_id').where('address', '=', address).executeTakeFirst()).toEqual({ account_id: account });
  });

  it('still excludes a second locker while the first holds it', async () => {
    const second = whileLocked(() =>
      db.transaction().execute(async (trx) => {
        await sql`set local lock_timeout = '300ms'`.execute(trx);
        await lockAccountRow(trx, account);
      }),
    );
    await expect(second).rejects.toMatchObject({ code: '55P03' }); // lock_not_available: it waited for the holder
    await db.transaction().execute(async (trx) => expect(await lockAccountRow(trx, account)).toBe(true)); // free again
  });

  it('says when there is no such account', async () => {
    await db.transaction().execute(async (trx) => expect(await lockAccountRow(trx, 'acct_none')).toBe(false));
  });
});
