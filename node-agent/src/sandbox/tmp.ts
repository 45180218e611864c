import type { Box } from './docker.ts';
import { execProgram } from './exec.ts';

/**
 * Writes a file into the box's /tmp (a tmpfs, which Docker's archive API cannot reach) by piping it to
 * `cat` in the container. Used for program code too big to pass as one argument.
 */
export async function writeTmp(box: Box, path: string, content: string): Promise<void> {
  let stderr = '';
  const out = await execProgram(box, {
    argv: ['sh', '-c', 'umask 077 && cat > "$1"', 'sh', path],
    env: [],
    stdin: content,
    timeoutMs: 30_000,
    outputBytes: 4096,
    emit: (s, t) => {
      if (s === 'stderr') stderr += t;
    },
    signal: new AbortController().signal,
    kill: async () => undefined,
  });
  if (out.exit_code !== 0) throw new Error(`writing ${path} in the sandbox failed: ${stderr.trim() || `exit ${String(out.exit_code)}`}`);
}
