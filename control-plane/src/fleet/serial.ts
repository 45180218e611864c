/**
 * Runs tasks one after another per key (tasks of different keys run side by side): what keeps the messages
 * about one job, or the writes about one node, in order. A failed task does not stop the ones after it.
 */
export class KeyedSerial {
  private readonly tails = new Map<string, Promise<void>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const done = (this.tails.get(key) ?? Promise.resolve()).then(task);
    const tail = done.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return done;
  }

  /** Resolves once every task started so far has ended. */
  async idle(): Promise<void> {
    await Promise.all([...this.tails.values()]);
  }
}
