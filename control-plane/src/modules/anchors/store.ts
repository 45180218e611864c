import { sql, type Kysely, type Selectable } from 'kysely';
import type { AnchorSubmissionsTable, DB } from '../../db/schema.ts';

export type SubmissionRow = Selectable<AnchorSubmissionsTable>;

export interface LeafRow {
  seq: number;
  hash: string;
  batch_root: string | null;
  leaf_index: number | null;
}

/** The anchors' tables: queued leaves, batches, and one submission per root and chain. */
export class AnchorStore {
  constructor(private readonly db: Kysely<DB>) {}

  /** Queues many leaves of one kind at once (each once per (kind, ref, hash)), on `db` (a caller's transaction) if given. */
  async enqueueMany(kind: string, items: Array<{ ref: string; hash: string }>, at: Date, db: Kysely<DB> = this.db): Promise<void> {
    if (items.length === 0) return;
    await db
      .insertInto('anchor_leaves')
      .values(items.map((i) => ({ kind, ref: i.ref, hash: i.hash, created_at: at })))
      .onConflict((oc) => oc.columns(['kind', 'ref', 'hash']).doNothing())
      .execute();
  }

  /** The leaves of these artifacts of one kind. */
  async leaves(kind: string, refs: string[]): Promise<Array<LeafRow & { ref: string }>> {
    if (refs.length === 0) return [];
    return this.db.selectFrom('anchor_leaves').select(['seq', 'ref', 'hash', 'batch_root', 'leaf_index']).where('kind', '=', kind).where('ref', 'in', refs).execute();
  }

  /** The leaf hashes of a batch in tree order (a root shared by two batches of the same hashes lists them once). */
  async batchLeaves(root: string): Promise<string[]> {
    const rows = await this.db.selectFrom('anchor_leaves').select(['hash', 'leaf_index']).where('batch_root', '=', root).orderBy('leaf_index').orderBy('seq').execute();
    const out: string[] = [];
    for (const r of rows) if (r.leaf_index === out.length) out.push(r.hash);
    return out;
  }

  async batch(root: string) {
    return this.db.selectFrom('anchor_batches').selectAll().where('root', '=', root).executeTakeFirst();
  }

  async submissions(root: string): Promise<SubmissionRow[]> {
    return this.db.selectFrom('anchor_submissions').selectAll().where('root', '=', root).orderBy('backend').execute();
  }

  /**
   * Takes up to `max` queued leaves in queue order, makes them a batch with the root `rootOf` computes, and
   * opens a submission per backend: one transaction, so a batch is never half made. Queued leaves are
   * locked (skip locked): a second process gathering at the same time takes others.
   */
  async gather(
    max: number,
    at: Date,
    rootOf: (hashes: string[]) => string,
    backends: Array<{ name: string; type: 'evm' | 'solana'; chainId: number; from: string }>,
  ): Promise<{ root: string; leaves: number } | null> {
    return this.db.transaction().execute(async (trx) => {
      const queued = await trx.selectFrom('anchor_leaves').select(['seq', 'hash']).where('batch_root', 'is', null).orderBy('seq').limit(max).forUpdate().skipLocked().execute();
      if (queued.length === 0) return null;
      const root = rootOf(queued.map((l) => l.hash));
      await trx.insertInto('anchor_batches').values({ root, leaf_count: queued.length, created_at: at }).onConflict((oc) => oc.column('root').doNothing()).execute();
      const seqs = queued.map((l) => Number(l.seq));
      const indexes = queued.map((_, i) => i);
      await sql`update anchor_leaves l set batch_root = ${root}, leaf_index = v.i
        from unnest(${seqs}::bigint[], ${indexes}::int[]) as v(seq, i) where l.seq = v.seq`.execute(trx);
      for (const b of backends) {
        await trx
          .insertInto('anchor_submissions')
          .values({ root, backend: b.name, type: b.type, chain_id: b.chainId, state: 'pending', from_address: b.from, attempts: 0, next_attempt_at: at, created_at: at })
          .onConflict((oc) => oc.columns(['root', 'backend']).doNothing())
          .execute();
      }
      return { root, leaves: queued.length };
    });
  }

  /** Submissions not yet anchored whose next attempt is due, oldest first. */
  async due(at: Date, limit: number): Promise<SubmissionRow[]> {
    return this.db.selectFrom('anchor_submissions').selectAll().where('state', '<>', 'anchored').where('next_attempt_at', '<=', at).orderBy('created_at').orderBy('root').limit(limit).execute();
  }

  async update(root: string, backend: string, patch: Partial<Omit<SubmissionRow, 'root' | 'backend'>>): Promise<void> {
    await this.db.updateTable('anchor_submissions').set(patch).where('root', '=', root).where('backend', '=', backend).execute();
  }

  /** Counts for the explorer. */
  async counts(): Promise<{ leaves: number; batches: number; anchored: number }> {
    const r = await sql<{ leaves: number; batches: number; anchored: number }>`select
      (select count(*) from anchor_leaves)::int as leaves,
      (select count(*) from anchor_batches)::int as batches,
      (select count(*) from anchor_submissions where state = 'anchored')::int as anchored`.execute(this.db);
    return r.rows[0] ?? { leaves: 0, batches: 0, anchored: 0 };
  }
}
