/**
 * Writes gathered while the previous one commits, then sent together (group commit): at a low rate each item is
 * written alone as it comes (no wait is added), and when items come faster than one statement commits, every item
 * that came meanwhile goes into the next statement, so the database sees one commit per round trip instead of one
 * per item. At most one statement is under way; a statement takes at most `max` keys. Items with the same key in
 * one round are merged to the latest (`write` is given each key once) and all of their callers get its answer.
 * A failed statement fails every item in it; the next round goes on.
 */
export class WriteBatch<K, V, R> {
  private pending = new Map<K, { value: V; waiters: Array<{ resolve: (r: R) => void; reject: (e: unknown) => void }> }>();
  private writing: Promise<void> | null = null;
  /** Statements written so far, and the items they carried (for status and benches). */
  readonly counts = { statements: 0, items: 0 };

  constructor(
    /** Writes the items and answers each key's result (a key missing from the answer is refused with `missing`). */
    private readonly write: (items: Array<{ key: K; value: V }>) => Promise<Map<K, R>>,
    private readonly missing: (key: K) => Error,
    private readonly max = 1000,
  ) {}

  /** Writes `value` for `key`, with whatever else comes while the statement before it commits. */
  add(key: K, value: V): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const p = this.pending.get(key);
      if (p) {
        p.value = value;
        p.waiters.push({ resolve, reject });
      } else this.pending.set(key, { value, waiters: [{ resolve, reject }] });
      if (!this.writing) this.writing = this.drain();
    });
  }

  /** Resolves once nothing is pending or being written. */
  async idle(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async drain(): Promise<void> {
    // Let the items of this tick join the first statement.
    await Promise.resolve();
    while (this.pending.size) {
      const round = [...this.pending.entries()].slice(0, this.max);
      for (const [k] of round) this.pending.delete(k);
      this.counts.statements++;
      this.counts.items += round.length;
      try {
        const answers = await this.write(round.map(([key, p]) => ({ key, value: p.value })));
        for (const [key, p] of round) {
          const r = answers.get(key);
          for (const w of p.waiters) r === undefined ? w.reject(this.missing(key)) : w.resolve(r);
        }
      } catch (e) {
        for (const [, p] of round) for (const w of p.waiters) w.reject(e);
      }
    }
    this.writing = null;
  }
}
