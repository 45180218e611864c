import { spawnSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, inject } from 'vitest';

/**
 * What some tests need from the machine, checked in one place: a Docker engine, the sandbox images, and
 * command-line tools (promtool, systemd-analyze). A test file asks for what it uses, and gates its tests on
 * the answer:
 *
 *   const enabled = sandboxImage();   // the engine and svc-sandbox:small
 *   describe.skipIf(!enabled)('...', ...)
 *
 * When a need is missing:
 * - under CI (`CI=true`) the file fails at once, saying what is missing and how to provide it: a CI run never
 *   passes with those tests skipped;
 * - elsewhere the tests are skipped, and the run ends with one line naming what was skipped and how to enable
 *   it (test/support/needs-report.ts, the suite's global setup, prints it).
 *
 * `SVC_TEST_SMALL_IMAGE` and `SVC_TEST_REAL_IMAGE` name other sandbox images for the tests to use (and so
 * to require).
 */

export const SMALL_IMAGE = process.env.SVC_TEST_SMALL_IMAGE || 'svc-sandbox:small';
export const REAL_IMAGE = process.env.SVC_TEST_REAL_IMAGE || 'svc-sandbox:latest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where test files write the needs they skipped for (one JSON line each); the global setup reads them. */
    needsSkippedDir: string;
  }
}

/** A need that is not met: what it is, why it is missing, and how to provide it. */
export interface Missing {
  need: string;
  why: string;
  enable: string;
}

const underCi = () => /^(1|true)$/i.test(process.env.CI ?? '');

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const run = (cmd: string, args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' });
const firstLine = (s: string | undefined) => (s ?? '').trim().split('\n')[0] ?? '';

let engine: Missing | null | undefined;
function engineMissing(): Missing | null {
  if (engine !== undefined) return engine;
  const r = run('docker', ['version', '--format', '{{.Server.Version}}']);
  const ok = r.status === 0 && r.stdout.trim().length > 0;
  const why = r.error ? 'the docker command is not installed' : `not reachable (${firstLine(r.stderr) || `docker version exited ${r.status}`})`;
  engine = ok ? null : { need: 'the Docker engine', why, enable: 'install docker.io and start dockerd (.ci/run does both)' };
  return engine;
}

const images = new Map<string, Missing | null>();
function imageMissing(image: string): Missing | null {
  if (!images.has(image)) {
    const ok = run('docker', ['image', 'inspect', image]).status === 0;
    const override = image === SMALL_IMAGE ? 'SVC_TEST_SMALL_IMAGE' : image === REAL_IMAGE ? 'SVC_TEST_REAL_IMAGE' : null;
    const small = image === SMALL_IMAGE && image !== REAL_IMAGE;
    const tag = image === 'svc-sandbox:small' || image === 'svc-sandbox:latest' ? '' : ` --tag ${image}`;
    const build = `bash installers/sandbox-image/build.sh${small ? ' --small' : ''}${tag}`;
    const named = override && process.env[override] ? ` (named by ${override})` : '';
    images.set(image, ok ? null : { need: `the sandbox image ${image}`, why: `not built${named}`, enable: `${build} (as root; .ci/run builds both images)` });
  }
  return images.get(image)!;
}

const tools = new Map<string, boolean>();
function hasTool(cmd: string): boolean {
  if (!tools.has(cmd)) tools.set(cmd, run('sh', ['-c', `command -v ${cmd}`]).status === 0);
  return tools.get(cmd)!;
}

/**
 * Whether `missing` is null (the need is met). Otherwise: under CI, throws; elsewhere, records the skip for the
 * run's summary line and returns false. `what` names the tests skipped (the test file by default).
 */
export function gate(missing: Missing | null, what?: string): boolean {
  if (!missing) return true;
  const file = currentFile();
  const text = `${missing.need}: ${missing.why}`;
  if (underCi()) {
    throw new Error(`CI=true and ${text}, so ${what ?? 'the tests of this file'} cannot run: ${missing.enable}. (Outside CI these tests are skipped.)`);
  }
  let dir: string | undefined;
  try {
    dir = inject('needsSkippedDir');
  } catch {
    dir = undefined; // not run by vitest with the suite's global setup
  }
  const line = { ...missing, file, what: what ?? null };
  if (dir) appendFileSync(join(dir, `${process.pid}.jsonl`), `${JSON.stringify(line)}\n`);
  else console.warn(`skipped ${what ?? file}: ${text}; to run it: ${missing.enable}`);
  return false;
}

function currentFile(): string {
  const path = expect.getState().testPath;
  return path ? relative(ROOT, path) : 'unknown file';
}

/** A Docker engine answering the `docker` command. */
export const dockerEngine = (what?: string) => gate(engineMissing(), what);

/** A Docker engine and the sandbox image `image` built on it (the small test image by default). */
export const sandboxImage = (image = SMALL_IMAGE, what?: string) => gate(engineMissing() ?? imageMissing(image), what);

/** A command on PATH, with how to install it. */
export const tool = (cmd: string, install: string, what?: string) => gate(hasTool(cmd) ? null : { need: cmd, why: 'not installed', enable: install }, what);
