import type { Clock } from '@svc/shared';
import { Ranking } from './ranking.ts';
import type { NodeSnapshot } from './scheduler.ts';

/** How old the index may be before the next dispatch starts a read of the registry's changed rows behind it. */
export const NODE_INDEX_REFRESH_MS = 10_000;

/**
 * The scheduler's in-memory view of the registry, so that a dispatch does not read every node: a full read
 * (NodeRegistry.snapshots) loads it, and the registry's own writes in this process (enrollment, heartbeat, gates,
 * approval, outcomes) put each changed node into it as they commit. Writes made by other processes reach it with
 * the next read of the rows changed since the last read (`merge`), at most `refreshMs` old when a dispatch asks,
 * and a full read now and then (`load`) settles everything else. It only proposes: the dispatcher checks the
 * node it picks against that node's row as it is now (NodeRegistry.fresh), so a gate, an un-approval, a
 * suspension or a silence committed anywhere keeps the job off the node; and it reads the whole registry before
 * it answers that no node is eligible.
 *
 * A full read started before a node was put may answer after it: `begin` numbers the read, and `load` keeps the
 * nodes put since that number (theirs is the later state).
 */
export class NodeIndex<N extends NodeSnapshot> {
  private readonly nodes = new Map<string, { node: N; seq: number }>();
  /** The same nodes in the scheduler's order, for `ranked`. */
  private readonly ranking = new Ranking<N>();
  private seq = 0;
  private loadedAt: number | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly refreshMs = NODE_INDEX_REFRESH_MS,
  ) {}

  /** No full read has been loaded yet, or the last one is `refreshMs` old. */
  get stale(): boolean {
    return this.loadedAt === null || this.clock.now().getTime() - this.loadedAt >= this.refreshMs;
  }

  get loaded(): boolean {
    return this.loadedAt !== null;
  }

  /** Numbers a full read about to start; pass the number to `load` with its rows. */
  begin(): number {
    return ++this.seq;
  }

  /** Replaces the view with a full read numbered `read`, made at `at`; nodes put since `read` began stay as put. */
  load(read: number, rows: readonly N[], at: Date = this.clock.now()): void {
    const newer = [...this.nodes.values()].filter((e) => e.seq > read);
    this.nodes.clear();
    for (const node of rows) this.nodes.set(node.id, { node, seq: read });
    for (const e of newer) this.nodes.set(e.node.id, e);
    this.ranking.reset(this.all());
    if (this.loadedAt === null || at.getTime() > this.loadedAt) this.loadedAt = at.getTime();
  }

  /**
   * Folds in a read of the rows changed since an earlier read (numbered `read` by `begin`, made at `at`): each
   * node read replaces the view's, `gone` (their owner is suspended now) leave it, except nodes put since `read`
   * began (theirs is the later state). The view counts as fresh from `at` as after a full read.
   */
  merge(read: number, rows: readonly N[], gone: readonly string[] = [], at: Date = this.clock.now()): void {
    const older = (id: string) => (this.nodes.get(id)?.seq ?? -1) <= read;
    for (const node of rows) if (older(node.id)) this.set(node, read);
    for (const id of gone) if (older(id)) this.remove(id);
    if (this.loadedAt === null || at.getTime() > this.loadedAt) this.loadedAt = at.getTime();
  }

  /** A node as its latest committed write left it. */
  put(node: N): void {
    this.set(node, ++this.seq);
  }

  /** A node that takes no work whatever its row says (its owner is suspended): out of the view until a read brings it back. */
  drop(id: string): void {
    this.remove(id);
    this.seq++;
  }

  private set(node: N, seq: number): void {
    this.nodes.set(node.id, { node, seq });
    this.ranking.put(node);
  }

  private remove(id: string): void {
    this.nodes.delete(id);
    this.ranking.delete(id);
  }

  get(id: string): N | undefined {
    return this.nodes.get(id)?.node;
  }

  /** Every node in the view. */
  *all(): IterableIterator<N> {
    for (const e of this.nodes.values()) yield e.node;
  }

  /** The nodes in the scheduler's order, best first (pickRanked stops at the first eligible one); those that can never win left out. */
  ranked(): IterableIterator<N> {
    return this.ranking.all();
  }

  get size(): number {
    return this.nodes.size;
  }
}
