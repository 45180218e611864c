import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { EngineBuildsTable } from '../../db/schema-engine.ts';

export type BuildRow = Selectable<EngineBuildsTable>;

/** Serializes the account's drafting and publishing (versions, the cap, the one published version per slug). */
export async function lockEngine(db: Kysely<DB>, accountId: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`engine:${accountId}`}))`.execute(db);
}

export async function countBuilds(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('engine_builds').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function nextVersion(db: Kysely<DB>, accountId: string, slug: string): Promise<number> {
  const r = await db.selectFrom('engine_builds').select((eb) => eb.fn.max<number | null>('version').as('v')).where('account_id', '=', accountId).where('slug', '=', slug).executeTakeFirstOrThrow();
  return Number(r.v ?? 0) + 1;
}

export async function insertBuild(db: Kysely<DB>, row: Insertable<EngineBuildsTable>): Promise<BuildRow> {
  return db.insertInto('engine_builds').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function ownedBuild(db: Kysely<DB>, accountId: string, id: string, forUpdate = false): Promise<BuildRow | undefined> {
  let q = db.selectFrom('engine_builds').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (forUpdate) q = q.forUpdate();
  return q.executeTakeFirst();
}

export async function listBuilds(db: Kysely<DB>, accountId: string, slug: string | undefined, cap: number): Promise<BuildRow[]> {
  let q = db.selectFrom('engine_builds').selectAll().where('account_id', '=', accountId);
  if (slug !== undefined) q = q.where('slug', '=', slug);
  return q.orderBy('seq', 'desc').limit(cap).execute();
}

/** The published version of a slug, or the version named (published or not: the caller checks its state). */
export async function servedBuild(db: Kysely<DB>, accountId: string, slug: string, version: number | null): Promise<BuildRow | undefined> {
  const q = db.selectFrom('engine_builds').selectAll().where('account_id', '=', accountId).where('slug', '=', slug);
  return (version === null ? q.where('state', '=', 'published') : q.where('version', '=', version)).executeTakeFirst();
}

/** Retires the slug's published version other than `keep`; returns how many it retired (0 or 1). */
export async function retirePublished(db: Kysely<DB>, accountId: string, slug: string, keep: string, now: Date): Promise<number> {
  const r = await db
    .updateTable('engine_builds')
    .set({ state: 'retired', retired_at: now })
    .where('account_id', '=', accountId)
    .where('slug', '=', slug)
    .where('state', '=', 'published')
    .where('id', '!=', keep)
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
}

export async function updateBuild(db: Kysely<DB>, id: string, set: Partial<Pick<BuildRow, 'state' | 'published_at' | 'retired_at' | 'deleted_at'>> & { system_prompt_sealed?: null }): Promise<BuildRow> {
  return db.updateTable('engine_builds').set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}
