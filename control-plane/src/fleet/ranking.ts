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

  /** Adds a node (not in the order yet); returns its score, which `remove` needs. */
  add(node: N): number {
    const s = rankOf(node);
    this.order.splice(this.at(s, node.id), 0, { node, score: s });
    return s;
  }

  /** Removes the node of id `id` added with score `s`. */
  remove(id: string, s: number): void {
    const i = this.at(s, id);
    if (this.order[i]?.node.id === id) this.order.splice(i, 1);
  }

  /** Puts `node` where the node of its id (added with score `s`) was, moving it only when its score changed. */
  replace(node: N, s: number): number {
    const next = rankOf(node);
    if (next === s) {
      const i = this.at(s, node.id);
      if (this.order[i]?.node.id === node.id) {
        this.order[i] = { node, score: s };
        return s;
      }
    }
    this.remove(node.id, s);
    return this.add(node);
  }

  /** Starts over from `nodes` (one sort). */
  reset(nodes: Iterable<N>): Map<string, number> {
    const scores = new Map<string, number>();
    this.order = [...nodes].map((node) => ({ node, score: rankOf(node) }));
    this.order.sort((a, b) => (a.score > b.score ? -1 : a.score < b.score ? 1 : a.node.id < b.node.id ? -1 : a.node.id > b.node.id ? 1 : 0));
    for (const e of this.order) scores.set(e.node.id, e.score);
    return scores;
  }

  /** The nodes in order, best first; a node that can never win is left out. */
  *all(): IterableIterator<N> {
    for (const e of this.order) {
      if (e.score === -Infinity) return;
      yield e.node;
    }
  }

  get size(): number {
    return this.order.length;
  }
}
