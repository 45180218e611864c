/**
 * A read its callers share, each getting one begun after it asked: a caller that asks while a read is under way
 * waits for the next, which starts when that one ends and serves everyone who asked meanwhile. A burst of callers
 * costs at most two reads, not one each.
 */
export class SharedRead<T> {
  private reading: Promise<T> | null = null;
  private queued: Promise<T> | null = null;

  constructor(private readonly read: () => Promise<T>) {}

  /** The read under way, if any. */
  get current(): Promise<T> | null {
    return this.reading;
  }

  run(): Promise<T> {
    if (!this.reading) return this.start();
    this.queued ??= this.reading
      .catch(() => undefined)
      .then(() => {
        this.queued = null;
        return this.start();
      });
    return this.queued;
  }

  private start(): Promise<T> {
    const p: Promise<T> = this.read().finally(() => {
      if (this.reading === p) this.reading = null;
    });
    this.reading = p;
    return p;
  }
}
