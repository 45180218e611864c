import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as ptySpawn } from 'node-pty';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from './support/agent.ts';
import { expectOneLineError, svc as runSvc, type CliRun } from './support/cli.ts';
import { a, t, up, useVideoGateway } from './support/videos.ts';

/**
 * `svc videos create --wait` through the real CLI against a real gateway and a local OpenAI Videos API server:
 * the render is moved along by the test (the upstream's state, then the leader's loop), and the CLI follows the
 * job's `progress` (a bar on a terminal), writes the mp4 when it succeeds, and exits 1 when it fails.
 */
useVideoGateway();
const ROOT = fileURLToPath(new URL('..', import.meta.url));
let tmp: string;
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-videos-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const args = (out: string) => ['videos', 'create', 'a fox running through snow', '--model', 'test-video', '--seconds', '8', '--wait', '--poll', '0.1', '-o', out];

/** The render the CLI started upstream: the first one after the `before` there were. */
const started = (before: number) => until('the render started upstream', async () => (up.videos.size > before ? [...up.videos.values()][before] : undefined));

/** Runs the leader's loop until `done()` (the CLI exited). */
async function drive(done: () => boolean): Promise<void> {
  await until('the CLI exited', async () => (done() ? true : (await t.gw.leader.runAllOnce(), false)), 60_000);
}

describe('svc videos create --wait', () => {
  it("follows the job's progress on a terminal, writes the video and exits 0", async () => {
    const out = join(tmp, 'fox.mp4');
    const before = up.videos.size;
    const term = ptySpawn(process.execPath, [join(ROOT, 'cli/bin/svc.js'), '--url', t.url, ...args(out)], {
      name: 'xterm-256color',
      cols: 100,
      rows: 24,
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: tmp, SVC_KEY: a.key, SVC_CONFIG_DIR: join(tmp, 'config') },
    });
    let screen = '';
    let code: number | null = null;
    term.onData((d) => (screen += d));
    term.onExit((e) => (code = e.exitCode));
    const job = await started(before);
    up.advance(job.id, { status: 'in_progress', progress: 40 });
    await until('the bar shows 40%', async () => {
      await t.gw.leader.runAllOnce();
      return /\[#{12}\.{18}\]\s+40%/.test(screen);
    });
    up.advance(job.id, { status: 'completed', progress: 100, seconds: '8' });
    await drive(() => code !== null);
    expect(code, screen).toBe(0);
    expect(readFileSync(out)).toEqual(up.content(job.id));
    expect(screen).toMatch(/render vid_\S+ succeeded: \S*fox\.mp4/);
  }, 90_000);

  it('a failed render is one error line and exit 1; --json prints the job with the path written', async () => {
    const before = up.videos.size;
    const failing = runSvc(args(join(tmp, 'never.mp4')), { dir: join(tmp, 'config'), url: t.url, env: { SVC_KEY: a.key }, timeoutMs: 60_000 });
    let done = false;
    void failing.finally(() => (done = true));
    const job = await started(before);
    up.advance(job.id, { status: 'failed', error: { code: 'moderation', message: 'refused by the model' } });
    await drive(() => done);
    expectOneLineError(await failing, 1, /^error: render vid_\S+ failed: .*; nothing was charged/);

    const out = join(tmp, 'ok.mp4');
    const ok = runSvc(['--json', ...args(out)], { dir: join(tmp, 'config'), url: t.url, env: { SVC_KEY: a.key }, timeoutMs: 60_000 });
    let finished = false;
    void ok.finally(() => (finished = true));
    const second = await started(before + 1);
    up.advance(second.id, { status: 'completed', progress: 100, seconds: '8' });
    await drive(() => finished);
    const r: CliRun = await ok;
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ status: 'succeeded', progress: 100, output_path: out });
    expect(r.stderr).not.toContain('\r'); // no bar where stderr is not a terminal
  }, 90_000);
});
