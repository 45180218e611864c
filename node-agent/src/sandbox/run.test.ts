import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_JOBS, type ExecResult } from '@svc/shared';
import { startSandbox, type Sandbox } from './index.ts';
import { call, cancelOn, capture, FULL_IMAGE, LIMITS, sandboxImage, SMALL_IMAGE, tempDataDir } from './testkit.ts';

const up = sandboxImage();
const run = (sb: Sandbox, job: Record<string, unknown>, c = capture()) =>
  call<ExecResult>(sb.handlers[SANDBOX_JOBS.run], { language: 'sh', timeout_ms: 10_000, limits: LIMITS, ...job }, c);

describe.skipIf(!up)('sandbox.run against the real Docker engine (small busybox image)', () => {
  let sb: Sandbox;
  beforeAll(async () => {
    const s = await startSandbox({ image: SMALL_IMAGE, poolSize: 1, dataDir: tempDataDir(), log: () => undefined });
    if ('unavailable' in s) throw new Error(s.unavailable);
    sb = s;
    await sb.ready;
  });
  afterAll(async () => {
    await sb?.stop();
  });

  it('streams stdout and stderr and reports the exit code, duration and image', async () => {
    const r = await run(sb, { code: 'echo out; echo err >&2; exit 3' });
    expect(r.stdout).toBe('out\n');
    expect(r.stderr).toBe('err\n');
    expect(r).toMatchObject({ exit_code: 3, timed_out: false, oom_killed: false, stdout_bytes: 4, stderr_bytes: 4, stdout_truncated: false, stderr_truncated: false });
    expect(r.image_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(Number.isFinite(r.duration_ms) && r.duration_ms >= 0).toBe(true); // a duration, in ms
  });

  it('pipes stdin, passes env, writes the job files into /workspace first, runs as uid 1000', async () => {
    const files = [{ path: 'data/in.txt', content_b64: Buffer.from('from a file\n').toString('base64') }];
    const r = await run(sb, { code: 'cat; echo "$GREETING"; cat data/in.txt; id -u; pwd', stdin: 'from stdin\n', env: { GREETING: 'hello env' }, files });
    expect(r.stdout).toBe('from stdin\nhello env\nfrom a file\n1000\n/workspace\n');
    expect(r.exit_code).toBe(0);
  });

  it('runs a `command` argv as is', async () => {
    const r = await run(sb, { command: ['echo', 'a b', '$HOME'] });
    expect(r.stdout).toBe('a b $HOME\n');
  });

  it('passes any argv and env bytes through the runner intact, and a big stdin', async () => {
    const args = ["it's", 'a\nb', '$HOME', 'back\\slash', ' sp ', '"dq"', '`x`', '\x1esvc-exit:0:'];
    const r = await run(sb, { command: ['sh', '-c', 'printf "%s|" "$@"; printf "%s|" "$X"; wc -c', 'sh', ...args], env: { X: "line1\nline2 'q' $Y" }, stdin: 'z'.repeat(1024 * 1024) });
    expect(r.stdout).toBe(`${args.join('|')}|line1\nline2 'q' $Y|1048576\n`);
    expect(r.exit_code).toBe(0);
  });

  it('runs code too big for one argument (through a file in /tmp)', async () => {
    const code = `# ${'x'.repeat(200 * 1024)}\necho big code ran`;
    const r = await run(sb, { code });
    expect(r.stdout).toBe('big code ran\n');
  });

  it('kills the program at the wall-clock limit and reports timed_out', async () => {
    // The whole program is killed at the limit, a background child too: neither lives to print after its sleep.
    const r = await run(sb, { code: 'echo started; (sleep 20; echo background) & sleep 20; echo foreground', timeout_ms: 700 });
    expect(r.timed_out).toBe(true);
    expect(r.exit_code).toBeNull();
    expect(r.stdout).toBe('started\n');
  });

  it('caps each output stream at limits.output_bytes and says it truncated', async () => {
    const r = await run(sb, { code: 'yes | head -c 5000; yes e | head -c 100 >&2', limits: { ...LIMITS, output_bytes: 1024 } });
    expect(r.stdout.length).toBe(1024);
    expect(r).toMatchObject({ stdout_bytes: 1024, stdout_truncated: true, stderr_bytes: 100, stderr_truncated: false, exit_code: 0 });
  });

  // No traffic leaves this machine: the only target is this host's own server, tried through loopback.
  it('has no network without `network: true`: only the loopback interface, no route, the host unreachable', async () => {
    const host: Server = createServer((_, res) => res.end('HOST-SERVER-REACHED')).listen(0, '0.0.0.0');
    await new Promise((r) => host.once('listening', r));
    const port = (host.address() as AddressInfo).port;
    try {
      const r = await run(sb, {
        code: [
          "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '",
          'echo routes: $(tail -n +2 /proc/net/route | wc -l)',
          `wget -q -T 2 -O - http://127.0.0.1:${port}/ 2>/dev/null || echo wget-failed`,
          `nc -w 2 127.0.0.1 ${port} </dev/null 2>/dev/null || echo nc-failed`,
        ].join('\n'),
        timeout_ms: 20_000,
      });
      expect(r.stdout).toBe('lo\nroutes: 0\nwget-failed\nnc-failed\n');
    } finally {
      host.close();
    }
  });

  it('has an interface besides lo when the job asks for network (no traffic sent)', async () => {
    const r = await run(sb, { code: "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort", network: true });
    expect(r.stdout.split('\n').filter(Boolean).length).toBeGreaterThan(1);
  });

  it('contains a fork bomb with the pids limit; the host survives and the next run works', async () => {
    // The program's own shell forks exactly once (`b &`, while nothing else runs yet) and then waits in a builtin
    // loop: any later fork of its own could find the bomb has used up the pids, and a shell whose fork fails
    // exits, ending the program before its time limit (seen in CI with `b` run in the foreground, and with `sleep`).
    const r = await run(sb, { code: 'b() { b | b & }; b & while :; do :; done', timeout_ms: 3000, limits: { ...LIMITS, pids: 32 } });
    expect(r.timed_out).toBe(true);
    expect(r.stderr).toMatch(/fork/i);
    expect(spawnSync('true').status).toBe(0);
    const after = await run(sb, { code: 'echo still fine' });
    expect(after.stdout).toBe('still fine\n');
  });

  it('OOM-kills a program past its memory limit and says so', async () => {
    const r = await run(sb, { code: 'x=aaaaaaaaaaaaaaaa; while :; do x="$x$x"; done', limits: { ...LIMITS, memory_mb: 32 }, timeout_ms: 30_000 });
    expect(r.oom_killed).toBe(true);
    expect(r.exit_code).toBe(137);
    expect(r.timed_out).toBe(false);
  });

  it('has a read-only root: writes outside /workspace (and /tmp) fail', async () => {
    const r = await run(sb, {
      code: 'touch /etc/x 2>/dev/null || echo etc-ro; touch /x 2>/dev/null || echo root-ro; touch /usr/bin/x 2>/dev/null || echo usr-ro; echo ok > /workspace/f && cat /workspace/f; echo t > /tmp/t && cat /tmp/t',
    });
    expect(r.stdout).toBe('etc-ro\nroot-ro\nusr-ro\nok\nt\n');
  });

  it('refuses job files outside the workspace with sandbox_bad_path', async () => {
    for (const path of ['../etc/passwd', 'a/../../b', '/etc/passwd', '/workspace/../etc/x']) {
      await expect(run(sb, { code: 'true', files: [{ path, content_b64: '' }] })).rejects.toThrow(/sandbox_bad_path/);
    }
  });

  it('stops the program when the job is cancelled, and reports what ran until then', async () => {
    const r = await run(sb, { code: 'echo start; sleep 20; echo end', timeout_ms: 60_000 }, cancelOn(capture(), 'start'));
    expect(r).toMatchObject({ canceled: 'canceled by test', exit_code: null, timed_out: false, stdout: 'start\n', stdout_bytes: 6 });
    expect(r.duration_ms).toBeGreaterThan(0);
    expect(r.image_digest).toMatch(/^sha256:/);
  });

  it.skipIf(!sandboxImage(FULL_IMAGE, 'Python and Node in the real image'))('runs Python and Node in the real image (svc-sandbox:latest)', async () => {
    const s = await startSandbox({ image: FULL_IMAGE, poolSize: 0, dataDir: tempDataDir(), log: () => undefined });
    if ('unavailable' in s) throw new Error(s.unavailable);
    try {
      const py = await run(s, { language: 'python', code: 'import sys, os\nprint(2**100)\nprint(sys.stdin.read().upper(), end="")\nprint(os.getuid())', stdin: 'piped\n' });
      expect(py.stdout).toBe('1267650600228229401496703205376\nPIPED\n1000\n');
      expect(py.exit_code).toBe(0);
      const nd = await run(s, { language: 'node', code: 'console.log([1,2,3].map(x => x * 2).join(","))' });
      expect(nd.stdout).toBe('2,4,6\n');
    } finally {
      await s.stop();
    }
  });
});
