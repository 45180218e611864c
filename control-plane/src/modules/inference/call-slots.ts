import type { CallerSignal } from '../../http/caller-signal.ts';

interface Waiter {
  grant(): void;
}

/**
 * The calls one provider pool carries at a time (its connections) and the queue of calls waiting for one.
 * The queue is kept here rather than in undici's pool: undici starts its time limits only once a connection
 * has the call, and a call aborted in its queue stays there until a connection frees, which it then opens
 * and closes again without sending. A call waiting here leaves as soon as its time or its caller runs out.
 */
export class CallSlots {
  private used = 0;
  private readonly queue: Waiter[] = [];

  constructor(readonly size: number) {}

  /** Takes a slot if one is free (no timer, no listener: the common case costs two comparisons). */
  tryTake(): boolean {
    if (this.used >= this.size) return false;
    this.used++;
    return true;
  }

  /**
   * Waits for a slot, handed over by `release`. Rejects with the signal's reason once it aborts, or with
   * `limit.error()` after `limit.ms`; either way the call leaves the queue and holds no slot.
   */
  wait(signal: CallerSignal, limit?: { ms: number; error: () => Error }): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const leave = (err: unknown) => {
        const i = this.queue.indexOf(w);
        if (i >= 0) this.queue.splice(i, 1);
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        reject(err);
      };
      const onAbort = () => leave(signal.reason);
      const w: Waiter = {
        grant: () => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.queue.push(w);
      signal.addEventListener('abort', onAbort, { once: true });
      if (limit) timer = setTimeout(() => leave(limit.error()), limit.ms);
    });
  }

  /**
   * Gives a slot back: to the free ones, or, when calls wait, to the longest waiting one on the next turn of
   * the event loop (undici frees a connection one turn after its answer ended; handed over at once, the call
   * would wait in undici's own queue for that turn).
   */
  release(): void {
    if (this.used <= 0) throw new Error('CallSlots: released more slots than were taken');
    if (this.queue.length === 0) {
      this.used--;
      return;
    }
    setImmediate(() => {
      const next = this.queue.shift();
      if (next) next.grant();
      else this.used--; // every waiter left meanwhile
    });
  }

  /** Slots in use and calls waiting (tests). */
  get state(): { used: number; waiting: number } {
    return { used: this.used, waiting: this.queue.length };
  }
}
