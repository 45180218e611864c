import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { ExplorerStore } from './store.ts';

/** Counts another module adds to the explorer (sealed calls, passports, ...), and its recent public items. */
export interface ExplorerSource {
  counts(): Promise<Record<string, number>>;
  recent?(limit: number): Promise<unknown[]>;
}

/** How long one snapshot serves every visitor: the counts scan whole tables. */
export const EXPLORER_CACHE_MS = 15_000;
export const RECENT = 10;

/**
 * The public explorer: aggregate proof counts and the most recent public items (shared receipts, anchor
 * batches, and what other modules register: passports, sealed calls, ...). Only what is already public
 * appears: shared receipts (never an account), batch roots; counts are totals. One snapshot is kept for
 * EXPLORER_CACHE_MS per process.
 */
export class Explorer {
  private readonly store: ExplorerStore;
  private readonly sources = new Map<string, ExplorerSource>();
  private cached: { at: number; value: Promise<ExplorerSnapshot> } | undefined;

  constructor(
    db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly publicBase: string,
  ) {
    this.store = new ExplorerStore(db);
  }

  /** Adds a module's counts (merged into `counts`) and, if it has them, its recent items (under `recent[name]`). */
  register(name: string, source: ExplorerSource): void {
    this.sources.set(name, source);
  }

  snapshot(): Promise<ExplorerSnapshot> {
    const now = this.clock.now().getTime();
    if (!this.cached || now - this.cached.at >= EXPLORER_CACHE_MS || now < this.cached.at) {
      const value = this.build();
      this.cached = { at: now, value };
      value.catch(() => (this.cached = undefined));
    }
    return this.cached.value;
  }

  private async build(): Promise<ExplorerSnapshot> {
    const [counts, shared, anchors] = await Promise.all([this.store.counts(), this.store.recentShared(RECENT), this.store.recentBatches(RECENT)]);
    const extra = await Promise.all(
      [...this.sources].map(async ([name, s]) => [name, await s.counts(), s.recent ? await s.recent(RECENT) : undefined] as const),
    );
    const recent: Record<string, unknown[]> = {
      shared_receipts: shared.map((r) => ({ id: r.id, kind: r.kind, created_at: r.created_at.toISOString(), shared_at: r.shared_at.toISOString(), page_url: `${this.publicBase}/r/${encodeURIComponent(r.id)}` })),
      anchors: anchors.map((b) => ({
        root: b.root,
        leaf_count: b.leaf_count,
        created_at: b.created_at.toISOString(),
        anchored_on: b.anchored_on,
        url: `${this.publicBase}/v1/anchors/${b.root}`,
      })),
    };
    const all: Record<string, number> = { ...counts };
    for (const [name, counts, items] of extra) {
      Object.assign(all, counts);
      if (items) recent[name] = items;
    }
    return { counts: all, recent, generated_at: this.clock.now().toISOString(), cache_seconds: EXPLORER_CACHE_MS / 1000 };
  }
}

export interface ExplorerSnapshot {
  counts: Record<string, number>;
  recent: Record<string, unknown[]>;
  generated_at: string;
  cache_seconds: number;
}
