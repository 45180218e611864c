import pg from 'pg';
import { randomId } from '@svc/shared';
import { postgresTemplate } from './database-templates.ts';

/**
 * Which storage the suite runs on: embedded PGlite by default (what `npm test` uses on a fresh machine),
 * or the real Postgres server when SVC_TEST_DATABASE=postgres (CI runs both). Each gateway gets a fresh
 * database that is dropped afterwards, made as a copy of a migrated template (database-templates.ts).
 */
export const TEST_DB_KIND = process.env.SVC_TEST_DATABASE === 'postgres' ? 'postgres' : 'pglite';
const ADMIN_URL = process.env.SVC_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  url: string | undefined;
  drop(): Promise<void>;
}

export async function freshDatabase(): Promise<TestDatabase> {
  if (TEST_DB_KIND === 'pglite') return { url: undefined, drop: async () => undefined };
  const name = `svc_test_${randomId(12)}`;
  const template = await postgresTemplate(ADMIN_URL); // already migrated (see database-templates.ts)
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${name}${template ? ` template ${template}` : ''}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
