import { InvalidArgumentError } from 'commander';

/** `--poll <seconds>`: how often a `--wait` asks again (0.1 to 60). */
export function pollSeconds(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0.1 || n > 60) throw new InvalidArgumentError('expected seconds, 0.1 to 60');
  return n;
}

/** Asks `read` every `everyMs` until `done` holds of its answer; `seen` gets each answer (for progress). */
export async function pollUntil<T>(read: () => Promise<T>, done: (v: T) => boolean, everyMs: number, seen: (v: T) => void = () => undefined): Promise<T> {
  for (;;) {
    const v = await read();
    seen(v);
    if (done(v)) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
