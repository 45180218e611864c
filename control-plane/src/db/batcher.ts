/**
 * Natural batching: the first item goes out at once; items that arrive while a batch is in flight wait and
 * go together in the next one. Latency at low load is one round trip; under load, round trips are shared.
 */
export class Batcher<I, O> {
  private queue: Array<{ item: I; resolve: (o: O) => void; reject: (e: unknown) => void }> = [];
  private inFlight = 0;

  constructor(
    private readonly run: (items: I[]) => Promise<O[]>,
    private readonly maxBatch = 256,
    private readonly maxInFlight = 2,
  ) {}

  /** Several items at once: they leave together (up to `maxBatch` per batch) rather than the first alone. */
  submitMany(items: I[]): Array<Promise<O>> {
    const out = items.map((item) => new Promise<O>((resolve, reject) => this.queue.push({ item, resolve, reject })));
    this.pump();
    return out;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      this.run(batch.map((b) => b.item)).then(
        (out) => batch.forEach((b, i) => b.resolve(out[i]!)),
        (err) => batch.forEach((b) => b.reject(err)),
      ).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }
}
