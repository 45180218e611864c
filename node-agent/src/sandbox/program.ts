import { randomBytes } from 'node:crypto';
import type { Language } from '@svc/shared';

export interface ProgramSpec {
  language: Language;
  code?: string | undefined;
  command?: string[] | undefined;
}

/** Linux refuses a single argv string over 128 KiB; bigger code goes through a file in /tmp. */
const MAX_INLINE_CODE = 96 * 1024;
const RUNNER: Record<Language, { inline: string[]; file: string[]; ext: string }> = {
  sh: { inline: ['sh', '-c'], file: ['sh'], ext: 'sh' },
  python: { inline: ['python3', '-c'], file: ['python3'], ext: 'py' },
  node: { inline: ['node', '-e'], file: ['node'], ext: 'js' },
};

/**
 * The argv a program runs as: `command` as is, else the language's interpreter on `code` (`sh -c`,
 * `python3 -c`, `node -e`). Code too big for one argument is first written to /tmp by `writeTmp` (an exec
 * of `cat` with the code on stdin) and run from there.
 */
export async function programArgv(p: ProgramSpec, writeTmp: (path: string, content: string) => Promise<void>): Promise<string[]> {
  if (p.command && p.command.length > 0) return p.command;
  if (p.code === undefined) throw new Error('invalid_request: a program needs `code` or `command`');
  const r = RUNNER[p.language];
  if (Buffer.byteLength(p.code) <= MAX_INLINE_CODE) return [...r.inline, p.code];
  const path = `/tmp/.svc-code-${randomBytes(6).toString('hex')}.${r.ext}`;
  await writeTmp(path, p.code);
  return [...r.file, path];
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `KEY=value` pairs for Docker's Env; a name that is not a plain identifier is refused. */
export function envList(env: Record<string, string> | undefined): string[] {
  return Object.entries(env ?? {}).map(([k, v]) => {
    if (!ENV_NAME.test(k) || k.length > 128) throw new Error(`invalid_request: bad environment variable name ${JSON.stringify(k.slice(0, 40))}`);
    if (v.includes('\0')) throw new Error(`invalid_request: environment variable ${k} contains NUL`);
    return `${k}=${v}`;
  });
}
