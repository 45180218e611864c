import { randomBytes } from 'node:crypto';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { LEADER_LOCK_KEY, WRITER_SETTING, parseBigint, type Database, type LeaderLock } from './backend.ts';
import type { DB } from './schema.ts';

pg.types.setTypeParser(20, parseBigint);

/** A pg pool on a real Postgres server (DATABASE_URL). */
export async function openPostgres(url: string): Promise<Database> {
  const processId = `svc_p_${randomBytes(8).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  pool.on('error', () => {
    /* idle client errors surface on the next query */
  });
  // Every connection of the pool names this process in a setting of its own (WRITER_SETTING), so rows record which
  // process wrote them (nodes.changed_by); queued on the new connection before any other query.
  pool.on('connect', (c) => void c.query('select set_config($1, $2, false)', [WRITER_SETTING, processId]).catch(() => undefined));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });

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

  // The connection of asyncCommit: opened on first use, opened again after it failed.
  let writer: Promise<pg.Client> | undefined;
  const writerClient = (): Promise<pg.Client> =>
    (writer ??= (async () => {
      const c = new pg.Client({ connectionString: url });
      const lost = () => {
        writer = undefined;
        c.end().catch(() => undefined);
      };
      c.on('error', lost);
      c.on('end', lost);
      try {
        await c.connect();
        await c.query('set synchronous_commit = off');
      } catch (e) {
        lost();
        throw e;
      }
      return c;
    })());

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
    async asyncCommit(name, text, values) {
      if (closed) throw new Error('the database is closed');
      await (await writerClient()).query({ name, text, values });
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
      const w = writer;
      writer = undefined;
      await w?.then((x) => x.end()).catch(() => undefined);
      await db.destroy();
    },
  };
}

