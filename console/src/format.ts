/** How the console shows numbers and times: exact micro-USD, and times in the viewer's own time zone. */

/** Micro-USD as dollars with every digit the API gave (6 decimals), e.g. 1_234_500 -> "$1.234500". */
export function usd(micro: number | null | undefined): string {
  if (micro === null || micro === undefined) return '-';
  const neg = micro < 0;
  const abs = Math.abs(micro);
  const whole = Math.floor(abs / 1_000_000);
  const frac = String(abs % 1_000_000).padStart(6, '0');
  return `${neg ? '-' : ''}$${whole.toLocaleString('en-US')}.${frac}`;
}

/** Dollars typed by a person ("12.5") to integer micro-USD; null when it is not an amount. */
export function parseUsd(text: string): number | null {
  const m = /^\s*\$?\s*(\d{1,12})(?:\.(\d{0,6}))?\s*$/.exec(text);
  if (!m) return null;
  return Number(m[1]) * 1_000_000 + Number((m[2] ?? '').padEnd(6, '0'));
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** An ISO time in the viewer's time zone. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '-';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTime.format(d);
}

/** The viewer's time zone, shown beside times. */
export const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

export function seconds(s: number | null | undefined): string {
  if (s === null || s === undefined) return '-';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = Math.floor(s % 60);
  return h ? `${h}h ${m}m ${r}s` : m ? `${m}m ${r}s` : `${r}s`;
}

/** Bytes as people read them: 1536 -> "1.5 KiB". */
export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  for (let v = n; v >= 1024 && i < units.length - 1; v /= 1024) i++;
  return i === 0 ? `${n} B` : `${(n / 1024 ** i).toFixed(1)} ${units[i]}`;
}

/** A local datetime-local input value to ISO, or undefined when empty. */
export function localToIso(v: string): string | undefined {
  if (!v) return undefined;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}
