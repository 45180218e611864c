import { closeSync, fsync, mkdirSync, openSync, readFileSync, readdirSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/** Journals open in this process (several gateways can run in one process, as in tests). */
const LIVE = new Set<string>();

/**
 * The journal of settles answered before they committed (Metering's write-behind). A settle is appended
 * here before its response is sent and leaves when its transaction committed, so a process that dies in
 * between leaves it on disk, and the next process started on this data dir settles it (`recover`).
 *
 * Appends go to the page cache with one write each (no fsync per request): they survive the process dying,
 * and a background fsync once a second bounds what a crash of the machine itself can lose.
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
   * Appends a settle (`json`: its JSON text, when the caller has it already); returns its segment, to hand
   * back to `done` once the settle committed.
   */
  append(item: T, json: string = JSON.stringify(item)): string {
    if (!this.current || this.current.entries >= this.segmentEntries) this.rotate();
    const c = this.current!;
    writeSync(c.fd, `${json}\n`);
    c.entries++;
    this.open.set(c.name, (this.open.get(c.name) ?? 0) + 1);
    this.dirty = true;
    return c.name;
  }

  /** The settle appended to `segment` committed. */
  done(segment: string): void {
    const n = (this.open.get(segment) ?? 1) - 1;
    this.open.set(segment, n);
    if (n <= 0 && segment !== this.current?.name) this.drop(segment);
  }

  private rotate(): void {
    const old = this.current;
    const name = `${this.prefix()}${this.seq++}.jsonl`;
    this.current = { name, fd: openSync(join(this.dir, name), 'a', 0o600), entries: 0 };
    this.open.set(name, 0);
    if (old) {
      closeSync(old.fd);
      if ((this.open.get(old.name) ?? 0) <= 0) this.drop(old.name);
    }
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
    clearInterval(this.timer);
    LIVE.delete(this.id);
    const c = this.current;
    if (!c) return;
    this.current = null;
    closeSync(c.fd);
    if ((this.open.get(c.name) ?? 0) <= 0) this.drop(c.name);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
