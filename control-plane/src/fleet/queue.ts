/** An unbounded async queue with one consumer: what the channel's job subscription yields from. */
export class AsyncQueue<T> {
  private items: T[] = [];
  private waiter: (() => void) | undefined;
  private closed = false;

  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.waiter?.();
  }

  close(): void {
    this.closed = true;
    this.waiter?.();
  }

  async *iterate(signal?: AbortSignal): AsyncGenerator<T> {
    const onAbort = () => this.close();
    signal?.addEventListener('abort', onAbort);
    try {
      for (;;) {
        while (this.items.length) yield this.items.shift()!;
        if (this.closed) return;
        await new Promise<void>((r) => (this.waiter = r));
        this.waiter = undefined;
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }
}
