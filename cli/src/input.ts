import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';
import { usageError, fileProblem } from './errors.ts';

/** All of stdin as text. */
export async function readStdin(stdin: NodeJS.ReadStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stdin) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** A file's text, or stdin's for `-`; a missing file is a usage error that names it. */
export async function readInput(path: string, what: string): Promise<string> {
  if (path === '-') return readStdin();
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw usageError(`cannot read ${what} ${path}: ${fileProblem(err)}`);
  }
}

/** An option parser for whole seconds from 1 to `max`. */
export function wholeSeconds(max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || n < 1 || n > max) throw new InvalidArgumentError(`expected whole seconds, 1 to ${max}`);
    return n;
  };
}

/** A repeatable `NAME=value` option, collected into an environment. */
export function collectEnv(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  const name = value.slice(0, eq);
  if (eq < 1 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new InvalidArgumentError(`expected NAME=value, got "${value}"`);
  return { ...previous, [name]: value.slice(eq + 1) };
}
