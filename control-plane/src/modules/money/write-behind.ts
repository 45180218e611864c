import type { Clock } from '@svc/shared';
import type { SettleItem } from './batch-calls.ts';
import type { PendingSettles } from './pending-settles.ts';
import { stallTrace } from '../platform/stall-trace.ts';

/**
 * Settles waiting to be flushed past which answers wait for their own commit again (the database is slow:
 * the backlog stops growing). Each one's cost stays reserved in its lease until it is flushed.
 */
const MAX_WAITING = 2048;
/** Group commits of pending rows in flight at once; the settles that come meanwhile go in the next one. */
const WRITES_IN_FLIGHT = 1;
/** The most pending rows one group commit writes. */
const WRITE_MAX = 512;
/** A gather this large is flushed at once. */
const GATHER_MAX = 256;
/** The longest a read waits for this process's own settles of the account to be flushed. */
const READ_WAIT_MS = 2000;

export interface WriteBehindDeps {
  store: PendingSettles;
  clock: Clock;
  log: { error(o: object, msg: string): void };
  /**
   * How long a durable settle waits for others to be flushed with (the first of a gather starts the timer).
   * At low load one transaction per request costs more than the request itself; gathered, it is shared.
   */
  gatherMs: number;
  /** A settle of this process was flushed (balance: after it, null when another process flushed it). */
  flushed(item: SettleItem, balance: number | null): Promise<void> | void;
}

interface Entry {
  item: SettleItem;
  durable: () => void;
  failed: (e: unknown) => void;
}

/**
 * Write-behind settles, this process's side (Metering.settleBehind). Two steps, one way:
 *  1. durable: the settle's pending row is written with the others of a group commit (`add` resolves once it
 *     committed; the answer may leave then);
 *  2. flushed: the pending rows gathered within `gatherMs` are taken and settled in one transaction; one that
 *     another process took first (a read of the account on another replica, the leader's sweep) counts as done.
 * Reads of an account wait for this process's settles of it (`settled`), then for those of every other
 * process (PendingSettles.settleAccount).
 */
export class WriteBehind {
  private readonly waiting = new Map<string, Set<Promise<void>>>();
  private count = 0;
  private closing = false;
  private toWrite: Entry[] = [];
  private writing = 0;
  private gather: Array<{ item: SettleItem; done: () => void }> = [];
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly d: WriteBehindDeps) {}

  /** Whether the next settle may be answered before it is flushed. */
  get open(): boolean {
    return !this.closing && this.count < MAX_WAITING;
  }

  /**
   * Makes a signed settle durable in its pending row and flushes it soon after. Resolves once the row
   * committed; rejects when it could not be written (then nothing of it is stored and the caller settles it
   * before answering).
   */
  add(item: SettleItem): Promise<void> {
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    this.track(item.account, done);
    return new Promise<void>((durable, failed) => {
      this.toWrite.push({
        item,
        durable: () => {
          durable();
          this.toFlush(item, resolveDone);
        },
        failed: (e) => {
          resolveDone();
          failed(e);
        },
      });
      if (this.writing < WRITES_IN_FLIGHT) this.write();
    });
  }

  /** Writes the settles waiting for a group commit (and the next group when this one committed). */
  private write(): void {
    const batch = this.toWrite.splice(0, WRITE_MAX);
    if (batch.length === 0) return;
    this.writing++;
    const t0 = stallTrace.enabled ? performance.now() : 0;
    this.d.store.add(batch.map((b) => b.item), this.d.clock.now()).then(
      () => {
        stallTrace.span('pending_write', t0);
        for (const b of batch) b.durable();
      },
      (e: unknown) => {
        for (const b of batch) b.failed(e);
      },
    ).finally(() => {
      this.writing--;
      if (this.toWrite.length > 0) this.write();
    });
  }

  /** Counts a settle until it is flushed, for the account's reads (`settled`), `open` and `close`. */
  private track(account: string, done: Promise<void>): void {
    let set = this.waiting.get(account);
    if (!set) this.waiting.set(account, (set = new Set()));
    set.add(done);
    this.count++;
    void done.finally(() => {
      this.count--;
      set.delete(done);
      if (set.size === 0 && this.waiting.get(account) === set) this.waiting.delete(account);
    });
  }

  private toFlush(item: SettleItem, done: () => void): void {
    this.gather.push({ item, done });
    if (this.gather.length >= GATHER_MAX) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.d.gatherMs);
  }

  /** Flushes what was gathered (in the background; failures are retried). */
  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.gather;
    this.gather = [];
    if (batch.length > 0) void this.flushBatch(batch);
  }

  private async flushBatch(batch: Array<{ item: SettleItem; done: () => void }>): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const t0 = stallTrace.enabled ? performance.now() : 0;
      try {
        const taken = await this.d.store.settleIds(batch.map((b) => b.item.receipt), this.d.clock.now());
        stallTrace.span('settle_commit', t0);
        for (const b of batch) {
          // Not taken: another process settled it first (or is settling it now, and will have by the time it reads).
          await Promise.resolve(this.d.flushed(b.item, taken.balances.get(b.item.receipt) ?? null)).catch(() => undefined);
          b.done();
        }
        return;
      } catch (e) {
        if (batch.length > 1) {
          // One faulty settle must not hold the others back: each goes on its own.
          await Promise.all(batch.map((b) => this.flushBatch([b])));
          return;
        }
        this.d.log.error({ request_id: batch[0]!.item.receipt, attempt, err: e }, 'settle not flushed yet; its pending row stays and is retried');
        if (this.closing) {
          for (const b of batch) b.done(); // stays pending in the database: any process settles it later
          return;
        }
        await new Promise((r) => setTimeout(r, Math.min(30_000, 100 * 2 ** attempt)).unref());
      }
    }
  }

  /**
   * Resolves once this process's settles of the account were flushed, or after READ_WAIT_MS when one cannot
   * be (the database away): a read then answers with what is stored rather than not at all.
   */
  async settled(accountId: string): Promise<void> {
    const set = this.waiting.get(accountId);
    if (!set) return;
    this.flush(); // a reader waits: no reason to wait for more settles to gather
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(set), new Promise((r) => (timer = setTimeout(r, READ_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Resolves once every settle of this process was flushed. */
  async settledAll(): Promise<void> {
    this.flush();
    await Promise.all([...this.waiting.values()].flatMap((s) => [...s]));
  }

  /** Waits (up to 10 s) for the settles on their way, then stops; any left stay pending for other processes. */
  async close(): Promise<void> {
    this.flush();
    await Promise.race([this.settledAll(), new Promise((r) => setTimeout(r, 10_000).unref())]);
    this.closing = true;
  }
}
