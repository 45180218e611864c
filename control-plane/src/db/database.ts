import { mkdirSync } from 'node:fs';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGlite, types as pgliteTypes } from '@electric-sql/pglite';
import { PGliteDialect } from './pglite-dialect.ts';
import type { DB } from './schema.ts';

/**
 * The storage backends: a pg pool on a real Postgres server (DATABASE_URL), or embedded PGlite in the
 * data directory. Both speak the same SQL, run the same migrations and give the same value types:
 * BIGINT as a JS number (money is integer micro-USD, far below 2^53), timestamptz as Date.
 */
export interface Database {
  db: Kysely<DB>;
  kind: 'postgres' | 'pglite';
  /** Subscribe to a NOTIFY channel; returns an unsubscribe function. */
  listen(channel: string, fn: (payload: string) => void): Promise<() => Promise<void>>;
  /** Try to take the process-wide advisory lock for leadership; true while held. */
  leaderLock: LeaderLock;
  close(): Promise<void>;
}

export interface LeaderLock {
  tryAcquire(): Promise<boolean>;
  /** Resolves false once a held lock has been lost (its connection died). */
  isHeld(): Promise<boolean>;
  release(): Promise<void>;
}

const LEADER_LOCK_KEY = 727_001;
const parseBigint = (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`BIGINT value ${v} exceeds the safe integer range`);
  return n;
};

pg.types.setTypeParser(20, parseBigint);

export async function openDatabase(opts: { databaseUrl?: string | undefined; dataDir?: string; memory?: boolean }): Promise<Database> {
  if (opts.databaseUrl) return openPostgres(opts.databaseUrl);
  return openPglite(opts.memory ? undefined : opts.dataDir);
}

async function openPostgres(url: string): Promise<Database> {
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  pool.on('error', () => {
    /* idle client errors surface on the next query */
  });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });

  let listener: pg.Client | undefined;
  const handlers = new Map<string, Set<(p: string) => void>>();
  const ensureListener = async () => {
    if (listener) return listener;
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    c.on('notification', (n) => handlers.get(n.channel)?.forEach((h) => h(n.payload ?? '')));
    c.on('error', () => {
      listener = undefined;
    });
    listener = c;
    return c;
  };

  let lockClient: pg.Client | undefined;
  const leaderLock: LeaderLock = {
    async tryAcquire() {
      if (!lockClient) {
        const c = new pg.Client({ connectionString: url });
        c.on('error', () => {
          lockClient = undefined;
        });
        await c.connect();
        lockClient = c;
      }
      const r = await lockClient.query<{ ok: boolean }>('select pg_try_advisory_lock($1) as ok', [LEADER_LOCK_KEY]);
      return r.rows[0]?.ok === true;
    },
    async isHeld() {
      if (!lockClient) return false;
      try {
        const r = await lockClient.query<{ n: number }>(
          "select count(*)::int as n from pg_locks where locktype = 'advisory' and objid = $1 and pid = pg_backend_pid() and granted",
          [LEADER_LOCK_KEY],
        );
        return (r.rows[0]?.n ?? 0) > 0;
      } catch {
        return false;
      }
    },
    async release() {
      const c = lockClient;
      lockClient = undefined;
      await c?.end().catch(() => undefined);
    },
  };

  return {
    db,
    kind: 'postgres',
    async listen(channel, fn) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error('bad channel name');
      let set = handlers.get(channel);
      if (!set) {
        set = new Set();
        handlers.set(channel, set);
        await (await ensureListener()).query(`listen ${channel}`);
      }
      set.add(fn);
      return async () => {
        set!.delete(fn);
      };
    },
    leaderLock,
    async close() {
      await leaderLock.release();
      await listener?.end().catch(() => undefined);
      await db.destroy();
    },
  };
}

async function openPglite(dataDir: string | undefined): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const pglite = new PGlite(dataDir ? `${dataDir}/pg` : undefined, {
    parsers: { [pgliteTypes.INT8]: parseBigint },
  });
  await pglite.waitReady;
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  let held = false;
  return {
    db,
    kind: 'pglite',
    async listen(channel, fn) {
      return pglite.listen(channel, fn);
    },
    leaderLock: {
      async tryAcquire() {
        if (held) return true;
        const r = await sql<{ ok: boolean }>`select pg_try_advisory_lock(${LEADER_LOCK_KEY}) as ok`.execute(db);
        held = r.rows[0]?.ok === true;
        return held;
      },
      async isHeld() {
        return held;
      },
      async release() {
        if (held) await sql`select pg_advisory_unlock(${LEADER_LOCK_KEY})`.execute(db).catch(() => undefined);
        held = false;
      },
    },
    async close() {
      await db.destroy();
      await pglite.close();
    },
  };
}
