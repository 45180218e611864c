import { closeSync, fsync, mkdirSync, openSync, readFileSync, readdirSync, unlinkSync, writeSync } from 'node:fs';
import { stallTrace } from '../platform/stall-trace.ts';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/** Journals open in this process (several gateways can run in one process, as in tests). */
const LIVE = new Set<string>();

/**
 * The journal of settles answered before they committed (Metering's write-behind). A settle is appended
 * here before its response is sent and leaves when its transaction committed, so a process that dies in
 * between leaves it on disk, and the next process started on this data dir settles it (`recover`).
 *
 * Appends go to the page cache (no fsync per request): they survive the process dying, and a background
 * fsync once a second bounds what a crash of the machine itself can lose. The settles appended in one turn
 * of the event loop go out in one write at its end (a write per request was about 3% of the event loop at
 * high rates); each append resolves once its line is written, and its answer waits for that.
 *
 * Files are segments named `settles-<pid>-<journal id>-<n>.jsonl`; a segment is deleted once every settle in
 * it committed and a newer one is being written. `recover` takes the segments of journals that are gone:
 * another pid that is not running, or this pid and a journal not open in this process (a container
 * restarts as pid 1).
 */
export class SettleJournal<T> {
  private readonly id = randomBytes(6).toString('hex');
  private seq = 0;
  private current: { name: string; fd: number; entries: number } | null = null;
  /** Settles appended and not yet committed, per segment. */
  private readonly open = new Map<string, number>();
  private dirty = false;
  private readonly timer: NodeJS.Timeout;
  /** Lines appended in this turn of the event loop, written at its end (`flush`). */
  private batch: Array<{ line: string; written: (segment: string) => void; failed: (e: unknown) => void }> = [];
  private readonly flushSoon = () => this.flush();

  constructor(
    private readonly dir: string,
    private readonly segmentEntries = 4096,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    LIVE.add(this.id);
    this.timer = setInterval(() => this.sync(), 1000);
    this.timer.unref();
  }

  private prefix(): string {
    return `settles-${process.pid}-${this.id}-`;
  }

  /**
   * Appends a settle (`json`: its JSON text, when the caller has it already). Resolves with its segment, to
   * hand back to `done` once the settle committed, when the line is written; rejects when it could not be
   * written whole (then nothing of it can be recovered: a line cut short is skipped).
   */
  append(item: T, json: string = JSON.stringify(item)): Promise<string> {
    return new Promise((written, failed) => {
      if (this.batch.push({ line: `${json}\n`, written, failed }) === 1) process.nextTick(this.flushSoon);
    });
  }

  /**
   * Appends a settle and writes it before returning, with any lines waiting for the end of this turn;
   * returns its segment (see `append`), or throws what kept it from being written whole.
   */
  appendNow(json: string): string {
    this.nowSegment = null;
    this.nowError = null;
    this.batch.push({ line: `${json}\n`, written: this.nowWritten, failed: this.nowFailed });
    this.flush();
    if (this.nowSegment === null) throw this.nowError ?? new Error('the settle was not journaled');
    return this.nowSegment;
  }

  /** What became of the line `appendNow` is writing (its callbacks are made once, not per line). */
  private nowSegment: string | null = null;
  private nowError: unknown = null;
  private readonly nowWritten = (segment: string): void => void (this.nowSegment = segment);
  private readonly nowFailed = (error: unknown): void => void (this.nowError = error);

  /** Writes the lines appended so far, a segment's share at a time (a full segment starts the next). */
  private flush(): void {
    const t0 = stallTrace.enabled ? performance.now() : 0;
    try {
      this.write();
    } finally {
      stallTrace.span('journal_write', t0);
    }
  }

  private write(): void {
    const batch = this.batch;
    this.batch = [];
    let i = 0;
    while (i < batch.length) {
      let c: { name: string; fd: number; entries: number };
      try {
        if (!this.current || this.current.entries >= this.segmentEntries) this.rotate();
        c = this.current!;
      } catch (e) {
        for (const b of batch.slice(i)) b.failed(e);
        return;
      }
      const part = batch.slice(i, i + this.segmentEntries - c.entries);
      i += part.length;
      const joined = part.length === 1 ? part[0]!.line : part.map((b) => b.line).join('');
      const bytes = Buffer.byteLength(joined);
      let off = 0;
      let error: unknown = null;
      try {
        off = writeSync(c.fd, joined); // written from the string (no Buffer of ours), whole as a rule
        if (off < bytes) {
          const text = Buffer.from(joined, 'utf8');
          while (off < bytes) off += writeSync(c.fd, text, off);
        }
      } catch (e) {
        error = e;
      }
      // The lines on file whole are journaled; the rest fail, and the segment takes no more lines after a
      // line cut short (the next would be glued to it).
      const ok = error ? wholeLines(part, off) : part.length;
      c.entries += ok;
      this.open.set(c.name, (this.open.get(c.name) ?? 0) + ok);
      if (ok) this.dirty = true;
      for (let k = 0; k < part.length; k++) {
        if (k < ok) part[k]!.written(c.name);
        else part[k]!.failed(error);
      }
      if (error) c.entries = this.segmentEntries;
    }
  }

  /** The settle appended to `segment` committed. */
  done(segment: string): void {
    const n = (this.open.get(segment) ?? 1) - 1;
    this.open.set(segment, n);
    if (n <= 0 && segment !== this.current?.name) this.drop(segment);
  }

  /** Closes the current segment (first: a failed write may have left its descriptor unusable) and opens the next. */
  private rotate(): void {
    const old = this.current;
    if (old) {
      this.current = null;
      try {
        closeSync(old.fd);
      } catch {
        /* closed already */
      }
      if ((this.open.get(old.name) ?? 0) <= 0) this.drop(old.name);
    }
    const name = `${this.prefix()}${this.seq++}.jsonl`;
    this.current = { name, fd: openSync(join(this.dir, name), 'a', 0o600), entries: 0 };
    this.open.set(name, 0);
  }

  private drop(segment: string): void {
    this.open.delete(segment);
    try {
      unlinkSync(join(this.dir, segment));
    } catch {
      /* already gone */
    }
  }

  private sync(): void {
    if (!this.dirty || !this.current) return;
    this.dirty = false;
    fsync(this.current.fd, () => undefined);
  }

  /** Whether any settle appended by this process has not committed yet. */
  get pending(): boolean {
    for (const n of this.open.values()) if (n > 0) return true;
    return false;
  }

  /**
   * The settles left by processes that are gone, with their segment files (delete them with `discard` once
   * the settles are in the database). A line cut short by the crash is skipped: its response never left.
   */
  recover(): { items: T[]; files: string[] } {
    const items: T[] = [];
    const files: string[] = [];
    for (const name of readdirSync(this.dir)) {
      const m = /^settles-(\d+)-([0-9a-f]+)-\d+\.jsonl$/.exec(name);
      if (!m) continue;
      const pid = Number(m[1]);
      if (pid === process.pid ? LIVE.has(m[2]!) : alive(pid)) continue;
      files.push(name);
      for (const line of readFileSync(join(this.dir, name), 'utf8').split('\n')) {
        if (!line) continue;
        try {
          items.push(JSON.parse(line) as T);
        } catch {
          /* the last line of a process that died mid-write */
        }
      }
    }
    return { items, files };
  }

  discard(files: string[]): void {
    for (const f of files) this.drop(f);
  }

  /** Stops the journal; the current segment is deleted when nothing in it is waiting. */
  close(): void {
    this.flush(); // lines appended in this turn still go out
    clearInterval(this.timer);
    LIVE.delete(this.id);
    const c = this.current;
    if (!c) return;
    this.current = null;
    closeSync(c.fd);
    if ((this.open.get(c.name) ?? 0) <= 0) this.drop(c.name);
  }
}

/** How many of `lines` the first `bytes` bytes hold whole (one lacking only its newline too: `recover` reads it). */
function wholeLines(lines: Array<{ line: string }>, bytes: number): number {
  let end = 0;
  let n = 0;
  for (const { line } of lines) {
    end += Buffer.byteLength(line);
    if (end - 1 > bytes) break;
    n++;
  }
  return n;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
