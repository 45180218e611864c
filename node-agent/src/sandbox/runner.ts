import { randomBytes } from 'node:crypto';
import { WORKSPACE } from '@svc/shared';
import type { Box, SandboxDocker } from './docker.ts';
import { pump, type ExecOptions, type ExecOutcome } from './exec.ts';

/** Single-quotes a word for sh; newlines become "$N" (the runner sets N to a newline) to keep one line. */
export function shQuote(s: string): string {
  if (s.includes('\0')) throw new Error('invalid_request: NUL in an argument or environment value');
  return `'${s.replace(/'/g, `'\\''`).replace(/\n/g, `'"$N"'`)}'`;
}

/**
 * The one line the runner evaluates: into the workspace, the job's environment, the program (in a
 * subshell that execs it), then the exit marker with the program's status on stdout and stderr. The marker carries a
 * random nonce the program never sees, and arrives long before Docker closes the streams of an exiting
 * container (~5 ms against 60-250 ms here).
 */
export function runnerLine(argv: string[], env: string[], nonce: string): string {
  const parts = [`cd ${shQuote(WORKSPACE)}`];
  if (env.length > 0) {
    parts.push(
      `export ${env
        .map((kv) => {
          const i = kv.indexOf('=');
          return `${kv.slice(0, i)}=${shQuote(kv.slice(i + 1))}`;
        })
        .join(' ')}`,
    );
  }
  const program = `( exec ${argv.map(shQuote).join(' ')} )`;
  return `${parts.join(' && ')} && ${program}; s=$?; m='\\036svc-exit:%s:%s\\n'; printf "$m" ${nonce} "$s"; printf "$m" ${nonce} "$s" >&2; exit "$s"\n`;
}

export const exitMarker = (nonce: string) => `\x1esvc-exit:${nonce}:`;

/**
 * Runs one program as the main process of a `runner` box (see RUNNER_CMD): attaches to the container's
 * stdio, sends the program line and stdin, streams output, kills the container at the wall-clock limit
 * or on cancel, then reads the exit code and `State.OOMKilled` of the exited container.
 */
export async function runInRunner(sd: SandboxDocker, box: Box, o: ExecOptions): Promise<ExecOutcome & { oom_killed: boolean }> {
  const nonce = randomBytes(12).toString('hex');
  const { killed, exitCode, ...p } = await pump(box.stdio, o, () => sd.killBox(box), { preamble: runnerLine(o.argv, o.env, nonce), end: true, exitMarker: exitMarker(nonce) });
  if (exitCode !== undefined && !killed) {
    // The program is done; the box is destroyed after (background processes die with it).
    return { ...p, exit_code: exitCode, oom_killed: await sd.oom.killedSince(box, 0, exitCode) };
  }
  // No marker: the runner itself died (OOM, kill): the container's own state tells.
  const waited = (await box.container.wait({ condition: 'not-running' })) as { StatusCode: number };
  const info = await box.container.inspect();
  // Killed by us (time limit, cancel): Docker's own state says whether the kernel had killed it first; no
  // waiting for events that a kill of ours never brings.
  const oom = info.State.OOMKilled || (!killed && (await sd.oom.killedSince(box, 0, waited.StatusCode)));
  return { ...p, exit_code: killed ? null : waited.StatusCode, oom_killed: oom };
}
