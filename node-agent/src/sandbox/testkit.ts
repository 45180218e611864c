import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Limits } from '@svc/shared';
import { dockerReachable } from '../capabilities.ts';
import type { JobContext, JobHandler } from '../jobs/types.ts';

/** Test support for the sandbox tests (not a test file): Docker check, the small image, job contexts. */

export const SMALL_IMAGE = 'svc-sandbox:small';
export const FULL_IMAGE = 'svc-sandbox:latest';
export const LIMITS: Limits = { memory_mb: 128, cpus: 1, pids: 64, output_bytes: 1024 * 1024 };

const BUILD = fileURLToPath(new URL('../../../installers/sandbox-image/build.sh', import.meta.url));

/** Whether Docker answers; if so, makes sure the small test image exists (built in seconds). */
export async function dockerForTests(): Promise<boolean> {
  const d = await dockerReachable();
  if (!d.reachable) {
    console.warn('sandbox tests skipped: the Docker engine is not reachable at /var/run/docker.sock');
    return false;
  }
  try {
    execFileSync('bash', [BUILD, '--small'], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    throw new Error(`Docker is reachable but the test image ${SMALL_IMAGE} could not be built with ${BUILD} --small: ${String((e as { stderr?: Buffer }).stderr ?? e)}`);
  }
  return true;
}

export function imageExists(image: string): boolean {
  try {
    execFileSync('docker', ['image', 'inspect', image], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

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
