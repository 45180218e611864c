import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { PGlite, types as pgliteTypes } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector'; // memory: vector search
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
  /**
   * This process's name on the server (`svc_p_<hex>`): its LISTEN connection carries it as application_name,
   * so other processes can tell whether it is still there (`processesAlive`).
   */
  processId: string;
  /** Which of these process ids still have their LISTEN connection open (pglite: only this process's own). */
  processesAlive(ids: readonly string[]): Promise<Set<string>>;
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

/**
 * bytea in and out of PGlite as hex text, converted natively. PGlite's own converters go byte by byte
 * through JavaScript arrays (`Array.from(bytes).map(...)` one way, `parseInt` per byte pair the other):
 * a 100 MiB file upload, the default limit, ran the process out of its 4 GB heap, and reading one back
 * took seconds. node-postgres sends bytea parameters in binary and parses results with Buffer already.
 */
export const pgliteBytea = {
  serialize: (v: unknown): string => {
    if (!(v instanceof Uint8Array)) throw new Error('Invalid input for bytea type');
    return `\\x${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex')}`;
  },
  parse: (v: string): Buffer => Buffer.from(v.slice(2), 'hex'),
};

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

  const processId = `svc_p_${randomBytes(8).toString('hex')}`;
  let listener: Promise<pg.Client> | undefined;
  let closed = false;
  const handlers = new Map<string, Set<(p: string) => void>>();
  // One connection LISTENs for every channel. If it drops, it is opened again (after a second, until that
  // works) and LISTENs to every channel again: notifications sent in between are lost, as NOTIFY's are.
  const ensureListener = (): Promise<pg.Client> => {
    if (listener) return listener;
    if (closed) return Promise.reject(new Error('the database is closed'));
    const attempt = (async () => {
      const c = new pg.Client({ connectionString: url, application_name: processId });
      const lost = () => {
        if (listener !== attempt) return;
        listener = undefined;
        c.end().catch(() => undefined);
        if (!closed && handlers.size > 0) setTimeout(() => void ensureListener().catch(() => undefined), 1000).unref();
      };
      c.on('error', lost);
      c.on('end', lost);
      c.on('notification', (n) => handlers.get(n.channel)?.forEach((h) => h(n.payload ?? '')));
      try {
        await c.connect();
        if (closed) throw new Error('the database is closed');
        // Named here too: an application_name in DATABASE_URL would override the one given to the client.
        await c.query('select set_config($1, $2, false)', ['application_name', processId]);
        for (const channel of handlers.keys()) await c.query(`listen ${channel}`);
      } catch (e) {
        lost();
        throw e;
      }
      return c;
    })();
    listener = attempt;
    return attempt;
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
    processId,
    async processesAlive(ids) {
      if (ids.length === 0) return new Set();
      const r = await pool.query<{ name: string }>('select distinct application_name as name from pg_stat_activity where application_name = any($1)', [ids]);
      return new Set(r.rows.map((x) => x.name));
    },
    async listen(channel, fn) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error('bad channel name');
      let set = handlers.get(channel);
      if (!set) {
        set = new Set();
        handlers.set(channel, set);
        const had = listener;
        const c = await ensureListener();
        if (had) await c.query(`listen ${channel}`); // a new connection LISTENs to every channel itself
      }
      set.add(fn);
      return async () => {
        set!.delete(fn);
      };
    },
    leaderLock,
    async close() {
      closed = true;
      await leaderLock.release();
      const c = listener;
      listener = undefined;
      await c?.then((x) => x.end()).catch(() => undefined);
      await db.destroy();
    },
  };
}

async function openPglite(dataDir: string | undefined): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  // One options object: PGlite(dataDir, options) ignores its options when dataDir is undefined (in memory).
  const pglite = new PGlite({
    ...(dataDir ? { dataDir: `${dataDir}/pg` } : {}),
    parsers: { [pgliteTypes.INT8]: parseBigint, [pgliteTypes.BYTEA]: pgliteBytea.parse },
    serializers: { [pgliteTypes.BYTEA]: pgliteBytea.serialize },
    extensions: { vector }, // memory: pgvector, created by the memory migration
  });
  await pglite.waitReady;
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  let held = false;
  const processId = `svc_p_${randomBytes(8).toString('hex')}`;
  return {
    db,
    kind: 'pglite',
    processId,
    async processesAlive(ids) {
      return new Set(ids.filter((id) => id === processId));
    },
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
