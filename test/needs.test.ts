import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { summary } from './support/needs-report.ts';

/**
 * Tests that need the machine's Docker engine or a sandbox image cannot pass by skipping. A run of
 * Docker-gated files (its own vitest process, with the suite's config) with the sandbox image named as one
 * that does not exist (SVC_TEST_SMALL_IMAGE), or with the docker command pointed at no engine (DOCKER_HOST),
 * fails under CI=true, saying what is missing; outside CI it passes with those tests skipped, and ends with one
 * line naming them and how to enable them (not a warning per file).
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VITEST = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
const ABSENT = `svc-sandbox:absent-${process.pid}`;
const FILES = ['test/sandbox-sessions-lost.test.ts', 'test/cli-run.test.ts', 'node-agent/src/sandbox/session.test.ts'];

function vitest(files: string[], env: Record<string, string | undefined>): Promise<{ code: number | null; out: string }> {
  // The child is a run of its own: none of this run's worker variables, one worker.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST') && k !== 'CI'));
  const child = spawn(process.execPath, [VITEST, 'run', ...files], { cwd: ROOT, env: { ...base, VITEST_MAX_WORKERS: '1', NO_COLOR: '1', ...env } });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out })));
}

describe('tests that need Docker, under CI', () => {
  it('fail the run when the sandbox image is missing, naming it and how to build it', async () => {
    const r = await vitest(FILES, { CI: 'true', SVC_TEST_SMALL_IMAGE: ABSENT });
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toMatch(/Test Files +3 failed/);
    expect(r.out).toContain(`CI=true and the sandbox image ${ABSENT}: not built (named by SVC_TEST_SMALL_IMAGE)`);
    expect(r.out).toContain('installers/sandbox-image/build.sh');
  }, 240_000);

  it('fail the run when no Docker engine answers', async () => {
    const r = await vitest(FILES.slice(0, 2), { CI: 'true', DOCKER_HOST: 'unix:///nonexistent/docker.sock' });
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toMatch(/Test Files +2 failed/);
    expect(r.out).toContain('CI=true and the Docker engine: not reachable');
  }, 240_000);
});

describe('tests that need Docker, outside CI', () => {
  it('are skipped, and the run ends with one line naming them and how to enable them', async () => {
    const r = await vitest(FILES, { SVC_TEST_SMALL_IMAGE: ABSENT });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/Test Files +3 skipped/);
    const lines = r.out.split('\n').filter((l) => l.includes(ABSENT));
    expect(lines, r.out).toHaveLength(1);
    expect(lines[0]).toMatch(/^SKIPPED: 3 test files need the sandbox image svc-sandbox:absent-\d+, not built \(named by SVC_TEST_SMALL_IMAGE\)/);
    for (const f of ['sandbox-sessions-lost.test.ts', 'cli-run.test.ts', 'session.test.ts']) expect(lines[0]).toContain(f);
    expect(lines[0]).toContain(`to run them: bash installers/sandbox-image/build.sh --small --tag ${ABSENT}`);
  }, 240_000);

  it('the line groups the skips by need; nothing skipped prints nothing', () => {
    const engine = { need: 'the Docker engine', why: 'not reachable (no socket)', enable: 'start dockerd' };
    const line = summary([
      { ...engine, file: 'test/a.test.ts', what: null },
      { ...engine, file: 'test/b.test.ts', what: null },
      { ...engine, file: 'test/a.test.ts', what: null },
      { need: 'promtool', why: 'not installed', enable: 'apt-get install prometheus', file: 'test/platform.test.ts', what: 'the promtool check' },
    ]);
    expect(line).toBe(
      'SKIPPED: 2 test files need the Docker engine, not reachable (no socket) [a.test.ts, b.test.ts]; to run them: start dockerd' +
        ' | 1 test file needs promtool, not installed [platform.test.ts (the promtool check)]; to run them: apt-get install prometheus. Under CI=true a missing need fails the run.',
    );
    expect(summary([])).toBe('');
  });
});
