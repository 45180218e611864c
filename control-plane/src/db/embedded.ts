import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Kysely, sql } from 'kysely';
import { PGlite, types as pgliteTypes } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector'; // memory: vector search
import { LEADER_LOCK_KEY, WRITER_SETTING, parseBigint, type Database } from './backend.ts';
import { PGliteDialect } from './pglite-dialect.ts';
import type { DB } from './schema.ts';

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

/**
 * The embedded server's buffer cache. Postgres's default (128MB) is allocated and touched in full as the
 * embedded server starts, in this process's memory; a cache miss here is a read from the data directory's
 * files (the operating system's page cache), so a smaller one costs little at an embedded deployment's sizes.
 */
const SHARED_BUFFERS = '32MB';

/** Embedded PGlite in the data directory (in memory without one). */
export async function openPglite(dataDir: string | undefined): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  // One options object: PGlite(dataDir, options) ignores its options when dataDir is undefined (in memory).
  const pglite = new PGlite({
    ...(dataDir ? { dataDir: `${dataDir}/pg` } : {}),
    parsers: { [pgliteTypes.INT8]: parseBigint, [pgliteTypes.BYTEA]: pgliteBytea.parse },
    serializers: { [pgliteTypes.BYTEA]: pgliteBytea.serialize },
    extensions: { vector }, // memory: pgvector, created by the memory migration
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${SHARED_BUFFERS}`],
  });
  await pglite.waitReady;
  const db = new Kysely<DB>({ dialect: new PGliteDialect(pglite) });
  let held = false;
  const processId = `svc_p_${randomBytes(8).toString('hex')}`;
  // Named as a server's connections are (postgres.ts): rows record which process wrote them (nodes.changed_by).
  await pglite.query('select set_config($1, $2, false)', [WRITER_SETTING, processId]);
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
