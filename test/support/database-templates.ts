import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openDatabase } from '../../control-plane/src/db/database.ts';
import { migrateToLatest } from '../../control-plane/src/db/migrate.ts';

/**
 * Migrated databases that test databases start as copies of, instead of being created and migrated each time.
 * A new PGlite database runs initdb, most of the time a test gateway takes to start; opening a copy of a
 * migrated one is several times faster. On the Postgres server, `create database ... template` copies a
 * migrated database in a fraction of the time the migrations take. One template per set of migrations and
 * PGlite version (named by their hash), so changing a migration builds a new one; gateways still run their
 * migrations on the copy, as on any existing database. `SVC_TEST_DB_TEMPLATE=off` turns templates off.
 */
const DB_DIR = new URL('../../control-plane/src/db/', import.meta.url);
const enabled = () => process.env.SVC_TEST_DB_TEMPLATE !== 'off';

let key: string | undefined;
function migrationsKey(): string {
  if (key) return key;
  const h = createHash('sha256');
  const files = ['migrate.ts', 'statements.ts', ...readdirSync(new URL('migrations/', DB_DIR)).sort().map((f) => `migrations/${f}`)];
  for (const f of files) {
    const url = new URL(f, DB_DIR);
    if (existsSync(url)) h.update(f).update('\0').update(readFileSync(url)).update('\0');
  }
  h.update(readFileSync(new URL('../../node_modules/@electric-sql/pglite/package.json', import.meta.url)));
  return (key = h.digest('hex').slice(0, 16));
}

// --- embedded database (PGlite): a data directory in the OS temp dir ---

const PGLITE_PREFIX = 'svc-test-pglite-';

async function buildPglite(): Promise<string> {
  const dir = join(tmpdir(), PGLITE_PREFIX + migrationsKey());
  if (existsSync(join(dir, 'ready'))) return dir;
  // Built aside and renamed into place, so a concurrent test file never copies a half-built template.
  const building = `${dir}.${randomBytes(6).toString('hex')}`;
  try {
    const database = await openDatabase({ dataDir: building });
    try {
      await migrateToLatest(database.db);
    } finally {
      await database.close();
    }
    writeFileSync(join(building, 'ready'), '');
    renameSync(building, dir);
  } catch (e) {
    rmSync(building, { recursive: true, force: true }); // failed, or another test file built it first
    if (!existsSync(join(dir, 'ready'))) throw e;
  }
  // Templates of other migration sets, unused for a day, go.
  for (const name of readdirSync(tmpdir())) {
    const path = join(tmpdir(), name);
    if (!name.startsWith(PGLITE_PREFIX) || path === dir) continue;
    try {
      if (statSync(path).mtimeMs < Date.now() - 24 * 3600_000) rmSync(path, { recursive: true, force: true });
    } catch {
      /* gone already */
    }
  }
  return dir;
}

let pgliteTemplate: Promise<string | null> | undefined;

/**
 * Copies the migrated template into `dataDir` as the gateway's embedded database (`<dataDir>/pg`). False when
 * there is none (turned off, or it could not be built): the gateway then starts on a new database.
 */
export async function seedEmbeddedDatabase(dataDir: string): Promise<boolean> {
  if (!enabled()) return false;
  pgliteTemplate ??= buildPglite().catch(() => null);
  const dir = await pgliteTemplate;
  if (!dir) return false;
  cpSync(join(dir, 'pg'), join(dataDir, 'pg'), { recursive: true });
  return true;
}

// --- Postgres server: a template database ---

async function admin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: adminUrl });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

function urlOf(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function buildPostgres(adminUrl: string): Promise<string> {
  const name = `svc_test_tpl_${migrationsKey()}`;
  const exists = (c: pg.Client) => c.query('select 1 from pg_database where datname = $1', [name]).then((r) => r.rowCount === 1);
  if (await admin(adminUrl, exists)) return name;
  const building = `${name}_${randomBytes(4).toString('hex')}`;
  await admin(adminUrl, (c) => c.query(`create database ${building}`));
  try {
    const database = await openDatabase({ databaseUrl: urlOf(adminUrl, building) });
    try {
      await migrateToLatest(database.db);
    } finally {
      await database.close();
    }
    // Renamed into place once whole; a name another test file took first fails here, and that one is used.
    await admin(adminUrl, (c) => c.query(`alter database ${building} rename to ${name}`));
  } catch (e) {
    await admin(adminUrl, (c) => c.query(`drop database if exists ${building} with (force)`)).catch(() => undefined);
    if (!(await admin(adminUrl, exists))) throw e;
  }
  return name;
}

const postgresTemplates = new Map<string, Promise<string | null>>();

/** The migrated template database on the server at `adminUrl` to create test databases from; null when there is none. */
export function postgresTemplate(adminUrl: string): Promise<string | null> {
  if (!enabled()) return Promise.resolve(null);
  let t = postgresTemplates.get(adminUrl);
  if (!t) postgresTemplates.set(adminUrl, (t = buildPostgres(adminUrl).catch(() => null)));
  return t;
}
