import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Limits } from '@svc/shared';
import type { JobContext, JobHandler } from '../jobs/types.ts';

/**
 * Test support for the sandbox tests (not a test file): job contexts and limits. Whether the Docker engine and
 * the images are there is asked of the suite's one check (test/support/needs.ts: under CI a missing one fails
 * the file; elsewhere its tests skip, named in one line at the end of the run).
 */

export { dockerEngine, REAL_IMAGE as FULL_IMAGE, sandboxImage, SMALL_IMAGE } from '../../../test/support/needs.ts';
export const LIMITS: Limits = { memory_mb: 128, cpus: 1, pids: 64, output_bytes: 1024 * 1024 };

export const tempDataDir = () => mkdtempSync(join(tmpdir(), 'svc-sandbox-test-'));

export interface Captured {
  ctx: JobContext;
  stdout: () => string;
  stderr: () => string;
  abort: (reason?: string) => void;
}

let seq = 0;
export function capture(jobId = `job_test_${process.pid}_${++seq}`): Captured {
  const ac = new AbortController();
  let out = '';
  let err = '';
  return {
    ctx: {
      jobId,
      signal: ac.signal,
      emit: (s, d) => {
        if (s === 'stdout') out += d;
        else if (s === 'stderr') err += d;
      },
    },
    stdout: () => out,
    stderr: () => err,
    abort: (reason = 'canceled by test') => ac.abort(reason),
  };
}

/** Cancels the job (as its control plane does when the caller leaves) once `marker` came on stdout. */
export function cancelOn(c: Captured, marker: string): Captured {
  const emit = c.ctx.emit;
  c.ctx.emit = (s, d) => {
    const wait = emit(s, d);
    if (c.stdout().includes(marker)) c.abort();
    return wait;
  };
  return c;
}

/** Calls a handler and returns its result with the captured output. */
export async function call<T = Record<string, unknown>>(h: JobHandler | undefined, payload: unknown, c: Captured = capture()): Promise<T & { stdout: string; stderr: string }> {
  if (!h) throw new Error('no such handler');
  const out = await h(payload, c.ctx);
  return { ...(out.result as T), stdout: c.stdout(), stderr: c.stderr() };
}

export const docker = (...args: string[]): string => execFileSync('docker', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
