import type { Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('denylist')
    .addColumn('sha256', 'text', (c) => c.primaryKey())
    .addColumn('reason', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('health_samples')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull())
    .addColumn('ok', 'boolean', (c) => c.notNull())
    .addColumn('db_ms', 'integer', (c) => c.notNull())
    .addColumn('process_id', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('health_samples_at').on('health_samples').column('at').execute();
}
