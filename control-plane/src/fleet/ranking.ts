import { score, type NodeSnapshot } from './scheduler.ts';

interface Ranked<N> {
  node: N;
  score: number;
}

/** A node's place in the order: its score, or -Infinity for one that can never win (a score that is not a number). */
const rankOf = (n: NodeSnapshot): number => {
  const s = score(n);
  return Number.isNaN(s) ? -Infinity : s;
};

/**
 * Nodes kept in the scheduler's order (scheduler.ts, pickNode): score high to low, ties to the lower id. A change
 * moves one node (two binary searches over the array), so a dispatch reads the order from the top and stops at
 * the first eligible node instead of scoring the whole fleet.
 */
export class Ranking<N extends NodeSnapshot> {
  private order: Array<Ranked<N>> = [];
  /** Each node's score as placed, to find it again. */
  private readonly scores = new Map<string, number>();

  /** Where a node of score `s` and id `id` is, or would go. */
  private at(s: number, id: string): number {
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const e = this.order[mid]!;
      if (e.score > s || (e.score === s && e.node.id < id)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Places `node`, or moves the node of its id to where its new score puts it (in place when the score is the same). */
  put(node: N): void {
    const s = rankOf(node);
    const was = this.scores.get(node.id);
    if (was !== undefined) {
      const i = this.at(was, node.id);
      if (was === s) {
        this.order[i] = { node, score: s };
        return;
      }
      this.order.splice(i, 1);
    }
    this.order.splice(this.at(s, node.id), 0, { node, score: s });
    this.scores.set(node.id, s);
  }

  delete(id: string): void {
    const was = this.scores.get(id);
    if (was === undefined) return;
    this.order.splice(this.at(was, id), 1);
    this.scores.delete(id);
  }

  /** Starts over from `nodes` (one sort). */
  reset(nodes: Iterable<N>): void {
    this.order = [...nodes].map((node) => ({ node, score: rankOf(node) }));
    this.order.sort((a, b) => (a.score > b.score ? -1 : a.score < b.score ? 1 : a.node.id < b.node.id ? -1 : a.node.id > b.node.id ? 1 : 0));
    this.scores.clear();
    for (const e of this.order) this.scores.set(e.node.id, e.score);
  }

  /** The nodes in order, best first; a node that can never win is left out. */
  *all(): IterableIterator<N> {
    for (const e of this.order) {
      if (e.score === -Infinity) return;
      yield e.node;
    }
  }
}
