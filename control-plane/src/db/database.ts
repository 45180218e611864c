export type { Database, LeaderLock } from './backend.ts';
import type { Database } from './backend.ts';

/**
 * Opens the storage backend: a pg pool on a real Postgres server (DATABASE_URL), or embedded PGlite in the
 * data directory. Each backend's driver loads only when it is the one opened (postgres.ts, embedded.ts).
 */
export async function openDatabase(opts: { databaseUrl?: string | undefined; dataDir?: string; memory?: boolean }): Promise<Database> {
  if (opts.databaseUrl) return (await import('./postgres.ts')).openPostgres(opts.databaseUrl);
  return (await import('./embedded.ts')).openPglite(opts.memory ? undefined : opts.dataDir);
}

