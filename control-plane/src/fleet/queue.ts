/**
 * An async queue with one consumer: what the channel's job subscription yields from. It takes every push; a
 * producer that should slow down for the consumer waits for `below` (with `weight`, the items' total weight).
 */
export class AsyncQueue<T> {
  private items: T[] = [];
  private waiter: (() => void) | undefined;
  private closed = false;
  private held = 0;
  private room: Array<{ limit: number; resolve: () => void }> = [];

  constructor(private readonly weight: (item: T) => number = () => 1) {}

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.held += this.weight(item);
    this.waiter?.();
  }

  /** Resolves once the consumer took the queue down to `limit` (or it closed); null when it is there already. */
  below(limit: number): Promise<void> | null {
    if (this.closed || this.held <= limit) return null;
    return new Promise((resolve) => this.room.push({ limit, resolve }));
  }

  private taken(): void {
    if (this.room.length === 0) return;
    const waiting = this.room;
    this.room = [];
    for (const w of waiting) {
      if (this.closed || this.held <= w.limit) w.resolve();
      else this.room.push(w);
    }
  }

  close(): void {
    this.closed = true;
    this.waiter?.();
    this.taken();
  }

  async *iterate(signal?: AbortSignal): AsyncGenerator<T> {
    const onAbort = () => this.close();
    signal?.addEventListener('abort', onAbort);
    try {
      for (;;) {
        while (this.items.length) {
          const item = this.items.shift()!;
          this.held -= this.weight(item);
          this.taken();
          yield item;
        }
        if (this.closed) return;
        await new Promise<void>((r) => (this.waiter = r));
        this.waiter = undefined;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }
}
