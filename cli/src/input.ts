import { readFileSync } from 'node:fs';
import { usageError } from './errors.ts';

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
    throw usageError(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}
