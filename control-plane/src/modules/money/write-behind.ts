import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { settleJson, type SettleItem, type SettleResult } from './batch-calls.ts';
import type { SettleJournal } from './settle-journal.ts';
import { stallTrace } from '../platform/stall-trace.ts';

/**
 * Settles waiting for their commit past which answers wait for their own commit again (the database is
 * slow or away: the backlog stops growing). Each is journaled and its cost stays reserved in its lease.
 */
const MAX_WAITING = 2048;
/**
 * How long a settle waits for others to commit with (the first of a gather starts the timer). At low load
 * one transaction per request costs more than the request itself (about 0.5 ms of Postgres CPU and a
 * socket round trip that wakes two processes); gathered, the commit is shared.
 */
const GATHER_MS = 20;
/** A gather this large commits at once. */
const GATHER_MAX = 256;
/** The longest an account's read waits for its settles to commit. */
const READ_WAIT_MS = 2000;

export interface WriteBehindDeps {
  db: Kysely<DB>;
  journal: SettleJournal<SettleItem>;
  log: { error(o: object, msg: string): void };
  /** Sends settles to the database (Metering's settle batches), one answer each. */
  submit(items: SettleItem[]): Array<Promise<SettleResult>>;
  /** Settles journaled items of a dead process in one batch (split on failure). */
  recover(items: SettleItem[]): Promise<SettleResult[]>;
  /** A settle committed (balance null when it was found already stored). */
  committed(item: SettleItem, balance: number | null): Promise<void>;
}

/**
 * Write-behind settles (Metering.settleBehind): a settle that was signed and answered is appended to the
 * journal, then committed with the others gathered within GATHER_MS; while the database is unreachable it
 * is retried, and a process that dies first leaves it to the next process on the data dir (`recover`).
 * Reads of an account wait for its settles (`settled`). At most MAX_WAITING wait at a time (`open`); past
 * that (the database slow or away) answers wait for their own commit again.
 */
export class WriteBehind {
  private readonly waiting = new Map<string, Set<Promise<void>>>();
  private count = 0;
  private closing = false;
  /** Settles gathered for the next commit, each with the resolver of its first attempt's answer. */
  private gather: Array<{ item: SettleItem; answer: (r: Promise<SettleResult>) => void }> = [];
  private timer: NodeJS.Timeout | null = null;
  recovered = 0;

  constructor(private readonly d: WriteBehindDeps) {}

  /** Whether the next settle may be answered before it commits. */
  get open(): boolean {
    return !this.closing && this.count < MAX_WAITING;
  }

  /**
   * Journals a signed settle and commits it with the others gathered in the next few milliseconds. With
   * `now`, its line is written before this returns (undefined; throws when it could not be); otherwise
   * with the others of this turn, and the promise resolves once it is (rejects when it could not be). Its
   * answer may leave once it is journaled; one that could not be commits nothing.
   */
  add(item: SettleItem, now = false): Promise<void> | undefined {
    const json = settleJson(item); // the same text goes to the database
    if (now) {
      this.track(item, this.commit(item, this.d.journal.appendNow(json)));
      return undefined;
    }
    const journaled = this.d.journal.append(item, json);
    // Counted and waited for (reads, close) from now on, while its line is still being written.
    this.track(
      item,
      journaled.then(
        (segment) => this.commit(item, segment),
        () => undefined, // not journaled: the caller settles it before answering instead
      ),
    );
    return journaled.then(() => undefined);
  }

  /** Counts a settle's commit and keeps it for the account's reads (`settled`) and `close` until it is done. */
  private track(item: SettleItem, committed: Promise<void>): void {
    let set = this.waiting.get(item.account);
    if (!set) this.waiting.set(item.account, (set = new Set()));
    set.add(committed);
    this.count++;
    void committed
      .finally(() => {
        this.count--;
        set.delete(committed);
        if (set.size === 0 && this.waiting.get(item.account) === set) this.waiting.delete(item.account);
      })
      .catch(() => undefined); // commit never rejects; this only keeps a bug from becoming an unhandled rejection
  }

  /** The first attempt of a settle: its answer from the gather's commit. */
  private gathered(item: SettleItem): Promise<SettleResult> {
    return new Promise<SettleResult>((answer) => {
      this.gather.push({ item, answer });
      if (this.gather.length >= GATHER_MAX) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), GATHER_MS);
    });
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.gather;
    this.gather = [];
    if (batch.length === 0) return;
    const t0 = stallTrace.enabled ? performance.now() : 0;
    const answers = this.d.submit(batch.map((b) => b.item));
    batch.forEach((b, i) => b.answer(answers[i]!));
    stallTrace.span('settle_commit', t0);
    if (stallTrace.enabled) {
      const t1 = performance.now();
      void Promise.allSettled(answers).then(() => stallTrace.span('settle_db', t1)); // the database's share: a backend and the WAL's flush take cores
    }
  }

  /** Commits a journaled settle, retrying while the database is unreachable; a settle already stored counts as done. */
  private async commit(item: SettleItem, segment: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      let row: SettleResult | undefined;
      try {
        row = await (attempt === 0 ? this.gathered(item) : this.d.submit([item])[0]!);
      } catch (e) {
        row = { hold: item.hold, outcome: 'error', balance: null, run_head: null, run_count: null, error: String(e) };
      }
      row ??= { hold: item.hold, outcome: 'error', balance: null, run_head: null, run_count: null, error: 'the database gave no answer for this settle' };
      if (row.outcome !== 'settled' && (await this.stored([item.receipt])).size > 0) row = { ...row, outcome: 'settled', balance: null };
      if (row.outcome === 'settled') {
        this.d.journal.done(segment);
        await this.d.committed(item, row.balance === null ? null : Number(row.balance)).catch(() => undefined); // bookkeeping after the commit never fails it
        return;
      }
      this.d.log.error({ request_id: item.receipt, attempt, error: row.error }, 'settle not committed yet; it stays in the journal and is retried');
      if (this.closing) return; // the next process on this data dir settles it from the journal
      await new Promise((r) => setTimeout(r, Math.min(30_000, 100 * 2 ** attempt)).unref());
    }
  }

  private async stored(ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.d.db.selectFrom('receipts').select('id').where('id', 'in', ids).execute().catch(() => []);
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Resolves once this account's settles committed, or after READ_WAIT_MS when one cannot commit (the
   * database away): a read then answers with what is committed rather than not at all.
   */
  async settled(accountId: string): Promise<void> {
    const set = this.waiting.get(accountId);
    if (!set) return;
    this.flush(); // a reader waits: no reason to wait for more settles to gather
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(set), new Promise((r) => (timer = setTimeout(r, READ_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** Resolves once every settle of this process committed. */
  async settledAll(): Promise<void> {
    this.flush();
    await Promise.all([...this.waiting.values()].flatMap((s) => [...s]));
  }

  /**
   * Settles what processes that died left in the journal (at boot, before serving). A settle whose receipt
   * is stored already committed before its process died and is skipped. Returns how many were settled now.
   */
  async recover(): Promise<number> {
    const { items, files } = this.d.journal.recover();
    let settled = 0;
    for (let i = 0; i < items.length; i += 256) {
      const chunk = items.slice(i, i + 256);
      const stored = await this.stored(chunk.map((c) => c.receipt));
      const todo = chunk.filter((c) => !stored.has(c.receipt));
      if (todo.length === 0) continue;
      const failed = (await this.d.recover(todo)).filter((o) => o.outcome !== 'settled');
      if (failed.length) throw new Error(`journaled settles could not be recovered: ${failed.map((f) => `${f.hold} ${f.error ?? f.outcome}`).join('; ')}`);
      settled += todo.length;
    }
    this.d.journal.discard(files);
    this.recovered += settled;
    return settled;
  }

  /** Waits (up to 10 s) for the settles on their way, then stops; any left stay in the journal. */
  async close(): Promise<void> {
    this.flush();
    await Promise.race([this.settledAll(), new Promise((r) => setTimeout(r, 10_000).unref())]);
    this.closing = true;
    this.d.journal.close();
  }
}
