import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

/** The explorer's reads: totals over the proof tables, and the newest public items. */
export class ExplorerStore {
  constructor(private readonly db: Kysely<DB>) {}

  async counts(): Promise<Record<string, number>> {
    const r = await sql<Record<string, number>>`select
      (select count(*) from receipts)::int as receipts,
      (select count(*) from receipts where shared_at is not null)::int as shared_receipts,
      (select count(*) from receipts where kind = 'notary')::int as notary_receipts,
      (select count(*) from runs)::int as runs,
      (select count(*) from anchor_leaves)::int as anchored_artifacts,
      (select count(*) from anchor_batches)::int as anchor_batches,
      (select count(*) from anchor_submissions where state = 'anchored')::int as chain_anchors`.execute(this.db);
    return r.rows[0]!;
  }

  async recentShared(limit: number) {
    const rows = await this.db
      .selectFrom('receipts')
      .select(['id', 'kind', 'created_at', 'shared_at'])
      .where('shared_at', 'is not', null)
      .orderBy('shared_at', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map((r) => ({ ...r, shared_at: r.shared_at! }));
  }

  /** The newest batches, each with the backends it is anchored on. */
  async recentBatches(limit: number) {
    const batches = await this.db.selectFrom('anchor_batches').selectAll().orderBy('created_at', 'desc').orderBy('root').limit(limit).execute();
    if (batches.length === 0) return [];
    const subs = await this.db
      .selectFrom('anchor_submissions')
      .select(['root', 'backend'])
      .where('root', 'in', batches.map((b) => b.root))
      .where('state', '=', 'anchored')
      .execute();
    return batches.map((b) => ({ ...b, anchored_on: subs.filter((s) => s.root === b.root).map((s) => s.backend).sort() }));
  }
}
