import { readFile } from 'node:fs/promises';
import type Docker from 'dockerode';
import { LABEL, OWNER } from './limits.ts';

interface Tracked {
  id: string;
  initPid: number;
}

/**
 * Counts OOM kills per container, so a run or a session exec can tell whether the kernel killed one of its
 * processes (the container's own `State.OOMKilled` is only set when the whole container exits).
 *
 * On the Docker host the count is read from the container's memory cgroup (`oom_kill` in cgroup v1's
 * memory.oom_control or v2's memory.events), found through /proc/<init pid>/cgroup: exact and immediate.
 * Docker's `oom` events are counted too, for when that file is not visible (the agent in another PID
 * namespace) or no longer there: a one-shot run's container exits right after its program, and its cgroup
 * goes with it, sometimes before the count is read.
 */
export class OomWatch {
  private readonly files = new Map<string, string>();
  private readonly events = new Map<string, number>();
  /** Containers being tracked: only their events are counted (a late one after untrack is not kept). */
  private readonly tracked = new Set<string>();
  private stream: NodeJS.ReadableStream | undefined;
  private closed = false;

  constructor(
    private readonly docker: Docker,
    private readonly log: (m: string) => void,
  ) {}

  async track(box: Tracked): Promise<void> {
    const file = box.initPid > 0 ? await cgroupOomFile(box.initPid) : null;
    if (file) this.files.set(box.id, file);
    this.tracked.add(box.id);
    this.watchEvents();
  }

  untrack(box: Tracked): void {
    this.files.delete(box.id);
    this.events.delete(box.id);
    this.tracked.delete(box.id);
  }

  /** OOM kills in the container so far, from its cgroup; null when that cannot be read (not visible, or gone). */
  private async fromCgroup(box: Tracked): Promise<number | null> {
    const file = this.files.get(box.id);
    return file ? readFile(file, 'utf8').then(parseOomKill, () => null) : null;
  }

  /** OOM kills in the container so far. */
  async count(box: Tracked): Promise<number> {
    return (await this.fromCgroup(box)) ?? this.events.get(box.id) ?? 0;
  }

  /**
   * Whether the container saw an OOM kill since `before`. From the cgroup when it can be read (exact); else
   * from Docker's events, which can lag the program's exit under load, so a program that died by SIGKILL
   * (exit 137) is looked at again for up to a second.
   */
  async killedSince(box: Tracked, before: number, exitCode: number | null): Promise<boolean> {
    const n = await this.fromCgroup(box);
    if (n !== null) return n > before;
    const seen = () => (this.events.get(box.id) ?? 0) > before;
    for (let i = 0; i < 10 && !seen() && (exitCode === 137 || exitCode === null); i++) await new Promise((r) => setTimeout(r, 100));
    return seen();
  }

  private watchEvents(): void {
    if (this.stream || this.closed) return;
    const filters = { type: ['container' as const], event: ['oom'], label: [`${LABEL.owner}=${OWNER}`] };
    this.docker.getEvents({ filters }).then(
      (s) => {
        this.stream = s;
        let buf = '';
        s.on('data', (d: Buffer) => {
          buf += d.toString('utf8');
          let nl: number;
          while ((nl = buf.indexOf('\n')) >= 0) {
            const line = buf.slice(0, nl);
            buf = buf.slice(nl + 1);
            try {
              const ev = JSON.parse(line) as { id?: string; Actor?: { ID?: string } };
              const id = ev.Actor?.ID ?? ev.id;
              if (id && this.tracked.has(id)) this.events.set(id, (this.events.get(id) ?? 0) + 1);
            } catch {
              /* not a JSON line */
            }
          }
        });
        const again = () => {
          this.stream = undefined;
          if (!this.closed) setTimeout(() => this.watchEvents(), 1000).unref();
        };
        s.on('end', again);
        s.on('error', again);
      },
      (e: unknown) => {
        this.log(`sandbox: cannot watch Docker oom events: ${(e as Error).message}`);
        if (!this.closed) setTimeout(() => this.watchEvents(), 5000).unref();
      },
    );
  }

  close(): void {
    this.closed = true;
    const s = this.stream as (NodeJS.ReadableStream & { destroy?: () => void }) | undefined;
    s?.destroy?.();
    this.stream = undefined;
  }
}

function parseOomKill(text: string): number | null {
  const m = /^oom_kill (\d+)$/m.exec(text);
  return m ? Number(m[1]) : null;
}

async function cgroupOomFile(pid: number): Promise<string | null> {
  let lines: string[];
  try {
    lines = (await readFile(`/proc/${pid}/cgroup`, 'utf8')).split('\n');
  } catch {
    return null;
  }
  const v1 = lines.find((l) => /^\d+:([^:]*,)?memory(,[^:]*)?:/.test(l));
  const candidates: string[] = [];
  if (v1) candidates.push(`/sys/fs/cgroup/memory${v1.slice(v1.lastIndexOf(':') + 1)}/memory.oom_control`);
  const v2 = lines.find((l) => l.startsWith('0::'));
  if (v2) candidates.push(`/sys/fs/cgroup${v2.slice(3)}/memory.events`);
  for (const f of candidates) {
    const ok = await readFile(f, 'utf8').then((t) => parseOomKill(t) !== null, () => false);
    if (ok) return f;
  }
  return null;
}
