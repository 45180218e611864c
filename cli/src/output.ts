import { paint } from './colour.ts';

/** Everything the CLI prints goes through here: stdout for results, stderr for notes and errors. */
export interface Output {
  json: boolean;
  /** A result: JSON when --json, else the human text. */
  result(value: unknown, human: () => string): void;
  note(text: string): void;
}

export function createOutput(json: boolean): Output {
  return {
    json,
    result(value, human) {
      const text = json ? JSON.stringify(value, null, 2) : human();
      process.stdout.write(text.endsWith('\n') ? text : text + '\n');
    },
    note(text) {
      const line = text.replace(/^warning:/, () => paint('yellow', 'warning:'));
      process.stderr.write(line.endsWith('\n') ? line : line + '\n');
    },
  };
}

/** A plain left-aligned text table. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    widths
      .map((w, i) => (cells[i] ?? '').padEnd(w))
      .join('  ')
      .trimEnd();
  return [paint('bold', line(headers), process.stdout), ...rows.map(line)].join('\n');
}

/** Micro-USD as dollars, without float rounding: 1234567 -> "$1.234567", 1500000 -> "$1.50". */
export function usd(micro: number | null): string {
  if (micro === null) return '-';
  const sign = micro < 0 ? '-' : '';
  const abs = Math.abs(Math.trunc(micro));
  const whole = Math.floor(abs / 1_000_000);
  const frac = String(abs % 1_000_000)
    .padStart(6, '0')
    .replace(/0{1,4}$/, '');
  return `${sign}$${whole}.${frac.padEnd(2, '0')}`;
}

/** Aligned "label  value" lines. */
export function fields(pairs: readonly (readonly [string, string])[]): string {
  const w = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n');
}
