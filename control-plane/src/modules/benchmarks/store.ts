import { sql, type Insertable, type Kysely, type Selectable } from 'kysely';
import type { BenchmarkReleasesTable, BenchmarkResultsTable, BenchmarksTable, DB } from '../../db/schema.ts';

export type BenchmarkRow = Selectable<BenchmarksTable>;
export type ResultRow = Selectable<BenchmarkResultsTable>;
export type ReleaseRow = Selectable<BenchmarkReleasesTable>;

/** Releases of one cohort are decided one at a time (within the transaction). */
export async function lockCohort(db: Kysely<DB>, cohort: string): Promise<void> {
  await sql`select pg_advisory_xact_lock(hashtext(${`benchmarks:${cohort}`}))`.execute(db);
}

export function insertBenchmark(db: Kysely<DB>, row: Insertable<BenchmarksTable>): Promise<BenchmarkRow> {
  return db.insertInto('benchmarks').values(row).returningAll().executeTakeFirstOrThrow();
}

export function ownedBenchmark(db: Kysely<DB>, accountId: string, id: string): Promise<BenchmarkRow | undefined> {
  return db.selectFrom('benchmarks').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
}

/** Locks a benchmark's row (refreshes of one benchmark number their versions one at a time). */
export function lockBenchmark(db: Kysely<DB>, id: string): Promise<BenchmarkRow | undefined> {
  return db.selectFrom('benchmarks').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
}

/**
 * The participants of a cohort now: each account's latest benchmark whose holdings are still sealed and
 * whose retention has not passed, with its sealed holdings.
 */
export async function liveParticipants(db: Kysely<DB>, cohort: string, now: Date): Promise<Array<{ id: string; holdings_sealed: Uint8Array }>> {
  const rows = await db
    .selectFrom('benchmarks')
    .select(['id', 'account_id', 'holdings_sealed'])
    .where('cohort', '=', cohort)
    .where('destroyed_at', 'is', null)
    .where('retain_until', '>', now)
    .orderBy('account_id')
    .orderBy('seq', 'desc')
    .execute();
  const seen = new Set<string>();
  const out: Array<{ id: string; holdings_sealed: Uint8Array }> = [];
  for (const r of rows) {
    if (seen.has(r.account_id) || !r.holdings_sealed) continue;
    seen.add(r.account_id);
    out.push({ id: r.id, holdings_sealed: r.holdings_sealed });
  }
  return out;
}

export function latestRelease(db: Kysely<DB>, cohort: string): Promise<ReleaseRow | undefined> {
  return db.selectFrom('benchmark_releases').selectAll().where('cohort', '=', cohort).orderBy('seq', 'desc').limit(1).executeTakeFirst();
}

export function insertRelease(db: Kysely<DB>, row: Insertable<BenchmarkReleasesTable>): Promise<ReleaseRow> {
  return db.insertInto('benchmark_releases').values(row).returningAll().executeTakeFirstOrThrow();
}

export function latestResult(db: Kysely<DB>, benchmarkId: string): Promise<ResultRow | undefined> {
  return db.selectFrom('benchmark_results').selectAll().where('benchmark_id', '=', benchmarkId).orderBy('version', 'desc').limit(1).executeTakeFirst();
}

export function results(db: Kysely<DB>, benchmarkId: string): Promise<ResultRow[]> {
  return db.selectFrom('benchmark_results').selectAll().where('benchmark_id', '=', benchmarkId).orderBy('version', 'desc').execute();
}

export function insertResult(db: Kysely<DB>, row: Insertable<BenchmarkResultsTable>): Promise<ResultRow> {
  return db.insertInto('benchmark_results').values(row).returningAll().executeTakeFirstOrThrow();
}

/** Destroys sealed holdings whose retention has passed (all due, or one benchmark); returns how many. */
export async function destroyDue(db: Kysely<DB>, now: Date, id?: string): Promise<number> {
  let q = db.updateTable('benchmarks').set({ holdings_sealed: null, destroyed_at: now }).where('destroyed_at', 'is', null).where('retain_until', '<=', now);
  if (id !== undefined) q = q.where('id', '=', id);
  const r = await q.executeTakeFirst();
  return Number(r.numUpdatedRows);
}

/** Participants per cohort now (for the cohort list, where they are banded). */
export async function participantCounts(db: Kysely<DB>, now: Date): Promise<Map<string, number>> {
  const rows = await db
    .selectFrom('benchmarks')
    .select(['cohort', (eb) => eb.fn.count<string>('account_id').distinct().as('n')])
    .where('destroyed_at', 'is', null)
    .where('retain_until', '>', now)
    .groupBy('cohort')
    .execute();
  return new Map(rows.map((r) => [r.cohort, Number(r.n)]));
}
