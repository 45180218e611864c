/**
 * The log as a person reads it on a terminal: one line per record, `HH:MM:SS.mmm LEVEL message  key=value ...`,
 * a request's line as `GET /v1/models 200 1.2 ms  req_...`, coloured unless NO_COLOR is set. A pino destination
 * (it gets each record as the JSON line pino wrote): loaded only when the log goes to a terminal, so a process
 * whose log is collected as JSON carries none of it.
 */
const LEVELS: Record<number, [string, number]> = { 10: ['TRACE', 90], 20: ['DEBUG', 36], 30: ['INFO ', 32], 40: ['WARN ', 33], 50: ['ERROR', 31], 60: ['FATAL', 35] };
/** Fields every record has, or that a line already shows in its own words. */
const SHOWN = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'reqId', 'component', 'method', 'path', 'status', 'duration_ms', 'error_type', 'stream']);

const pad = (n: number, w = 2) => String(n).padStart(w, '0');

function value(v: unknown): string {
  if (typeof v === 'string') return /[\s"=]/.test(v) || v === '' ? JSON.stringify(v) : v;
  if (v && typeof v === 'object' && 'message' in v && typeof (v as { message: unknown }).message === 'string') return JSON.stringify((v as { message: string }).message);
  return JSON.stringify(v);
}

export function formatRecord(line: string, colour: boolean): string {
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`;
  }
  const paint = (code: number, s: string) => (colour ? `\x1b[${code}m${s}\x1b[0m` : s);
  const t = new Date(typeof r.time === 'number' ? r.time : Date.now());
  const time = `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}.${pad(t.getMilliseconds(), 3)}`;
  const [name, code] = LEVELS[r.level as number] ?? [String(r.level).toUpperCase().padEnd(5), 0];
  let msg = typeof r.msg === 'string' ? r.msg : '';
  if (typeof r.status === 'number' && typeof r.method === 'string') {
    const s = r.status;
    const status = paint(s >= 500 ? 31 : s >= 400 ? 33 : 32, String(s));
    msg = `${r.method} ${String(r.path)} ${status} ${String(r.duration_ms)} ms${r.error_type ? ` ${paint(s >= 500 || r.stream === 'upstream_broke' ? 31 : 33, String(r.error_type))}` : ''}${r.stream ? ` (stream ${String(r.stream)})` : ''}`;
  }
  const extra = Object.entries(r)
    .filter(([k, v]) => !SHOWN.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${value(v)}`)
    .join(' ');
  const who = typeof r.component === 'string' ? `${paint(36, r.component)} ` : '';
  const id = typeof r.reqId === 'string' ? `  ${paint(90, r.reqId)}` : '';
  return `${paint(90, time)} ${paint(code, name)} ${who}${msg}${id}${extra ? `  ${paint(90, extra)}` : ''}\n`;
}

/** A pino destination writing readable lines to `out` (the terminal). */
export function prettyDestination(out: NodeJS.WritableStream, colour: boolean): { write(line: string): void } {
  return { write: (line) => void out.write(formatRecord(line.trimEnd(), colour)) };
}
