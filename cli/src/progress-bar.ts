/**
 * A progress bar on stderr, drawn only when stderr is a terminal (logs, pipes and CI get nothing): `label
 * [#####.....]  42%  done/total unit`. Redrawn at most every 100 ms; `stop` erases it.
 */
export interface ProgressBar {
  /** Where the work is; `total` may change (a batch's line count is known once it is validated). */
  update(done: number, total?: number, note?: string): void;
  stop(): void;
}

const WIDTH = 30;
const REDRAW_MS = 100;

/** Bytes as people read them: 1536 -> "1.5 KiB". */
export function bytesText(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

export function progressBar(label: string, total: number, opts: { format?: (done: number, total: number) => string; stream?: NodeJS.WriteStream } = {}): ProgressBar {
  const stream = opts.stream ?? process.stderr;
  if (!stream.isTTY) return { update: () => undefined, stop: () => undefined };
  const format = opts.format ?? ((d, t) => `${d}/${t}`);
  let done = 0;
  let last = 0;
  let note = '';
  let stopped = false;
  const draw = () => {
    const frac = total > 0 ? Math.min(1, done / total) : 0;
    const filled = Math.round(frac * WIDTH);
    const line = `${label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${String(Math.floor(frac * 100)).padStart(3)}%  ${format(done, total)}${note ? `  ${note}` : ''}`;
    const cols = stream.columns ?? 80;
    stream.write(`\r\x1b[2K${line.slice(0, Math.max(10, cols - 1))}`);
    last = Date.now();
  };
  draw();
  return {
    update(d, t, n) {
      if (stopped) return;
      done = d;
      if (t !== undefined) total = t;
      if (n !== undefined) note = n;
      if (Date.now() - last >= REDRAW_MS || (total > 0 && done >= total)) draw();
    },
    stop() {
      if (stopped) return;
      stopped = true;
      stream.write('\r\x1b[2K');
    },
  };
}
