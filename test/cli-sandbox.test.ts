import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawn as ptySpawn, type IPty } from 'node-pty';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { enrollAgent, until, type TestAgent } from './support/agent.ts';
import { SMALL_IMAGE, sandboxImage } from './support/needs.ts';
import { startUpstream, type TestUpstream } from './support/upstream.ts';
import { batchEnv, chatLine, jsonl } from './support/batches.ts';
import { expectOneLineError, svc as runSvc, type CliRun } from './support/cli.ts';

/**
 * `svc sandbox`, `svc files` and `svc batches` through the real CLI in a child process, against a real control
 * plane with a real svc-node agent and Docker (the small busybox image) and a local model upstream. `svc sandbox
 * shell` runs on a pseudo-terminal (node-pty), as a person would use it: typing, a window resize, ^C.
 */
const enabled = sandboxImage();
const ROOT = fileURLToPath(new URL('..', import.meta.url));

let t: TestGateway;
let up: TestUpstream;
let agent: TestAgent;
let key: string;
let api: SvcClient;
let tmp: string;
beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'svc-cli-sandbox-'));
  if (!enabled) return;
  up = await startUpstream();
  t = await startTestGateway({ env: { ...batchEnv(up.url), SVC_SANDBOX_PRICE_MICRO_USD_PER_SECOND: '1000', SVC_SANDBOX_MEMORY_MB: '64' } });
  const owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 1_000_000_000, 'grant', 'cli-sandbox-tests');
  key = (await owner.client.createKey({ scopes: ['sandboxes', 'files', 'inference'] })).key;
  api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key } });
  agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: SMALL_IMAGE });
  await until('sandbox agent connected and heartbeating', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
}, 120_000);
afterAll(async () => {
  await agent?.kill('SIGTERM');
  await t?.close();
  await up?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const svc = (args: string[], opts: { input?: string; key?: string | null } = {}): Promise<CliRun> =>
  runSvc(args, { dir: join(tmp, 'config'), url: t.url, input: opts.input, env: opts.key === null ? {} : { SVC_KEY: opts.key ?? key }, timeoutMs: 90_000 });
const local = (name: string, content: string | Buffer) => {
  const p = join(tmp, name);
  writeFileSync(p, content);
  return p;
};
const ps = async (id: string) => (await api.request<{ stdout: string }>('POST', `/v1/sandboxes/sessions/${id}/exec`, { body: { code: 'ps' } })).stdout;

describe.skipIf(!enabled)('svc sandbox', () => {
  let id: string;

  it('open prints the session id and nothing else on stdout; --json the session', async () => {
    const r = await svc(['sandbox', 'open']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^sbx_\w+\n$/);
    id = r.stdout.trim();
    const j = await svc(['--json', 'sandbox', 'status', id]);
    expect(JSON.parse(j.stdout)).toMatchObject({ id, status: 'running', node_id: agent.nodeId });
  });

  it('put, get and ls move workspace files; exec runs in the same workspace and passes its exit code', async () => {
    const src = local('hello.txt', 'hello file\n');
    const put = await svc(['sandbox', 'put', id, src, 'dir/hello.txt']);
    expect(put.code, put.stderr).toBe(0);
    expect(put.stdout).toBe('/workspace/dir/hello.txt\n');
    const fromStdin = await svc(['sandbox', 'put', id, '-', 'dir/in.bin'], { input: 'from stdin' });
    expect(fromStdin.code, fromStdin.stderr).toBe(0);

    const get = await svc(['sandbox', 'get', id, 'dir/hello.txt']);
    expect({ code: get.code, stdout: get.stdout }).toEqual({ code: 0, stdout: 'hello file\n' });
    const out = join(tmp, 'copy.txt');
    const toFile = await svc(['sandbox', 'get', id, '/workspace/dir/in.bin', out]);
    expect({ code: toFile.code, stdout: toFile.stdout }).toEqual({ code: 0, stdout: '' });
    expect(readFileSync(out, 'utf8')).toBe('from stdin');

    const ls = await svc(['sandbox', 'ls', id, 'dir']);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stdout).toMatch(/^TYPE\s+SIZE\s+MODIFIED\s+NAME$/m);
    expect(ls.stdout).toMatch(/^file\s+11\s+\S+\s+hello\.txt$/m);
    const lsJson = await svc(['--json', 'sandbox', 'ls', id]);
    expect(JSON.parse(lsJson.stdout)).toMatchObject({ path: '/workspace', entries: [{ name: 'dir', type: 'dir' }] });

    const ex = await svc(['sandbox', 'exec', id, '--', 'sh', '-c', 'cat dir/hello.txt; echo oops >&2; exit 3']);
    expect(ex.code, ex.stderr).toBe(3);
    expect(ex.stdout).toBe('hello file\n');
    expect(ex.stderr).toMatch(/^oops$/m);
    expect(ex.stderr).toMatch(/^exit 3 {2}\d+\.\d\d s {2}receipt \S+ {2}cost \$\d+\.\d+$/m);
    const streamed = await svc(['sandbox', 'exec', id, '--stream', '-c', 'echo a; echo b >&2; exit 4']);
    expect(streamed.code, streamed.stderr).toBe(4);
    expect(streamed.stdout).toBe('a\r\nb\r\n'); // under a terminal: stderr merged, CRLF
    const missing = await svc(['sandbox', 'get', id, 'nope.txt']);
    expectOneLineError(missing, 1, /^error: not_found: /);
  });

  it('shell: a real terminal; typing, a resize that stty follows, ^C reaching the sandbox, the exit code passed through', async () => {
    const term = ptySpawn(process.execPath, [join(ROOT, 'cli/bin/svc.js'), '--url', t.url, 'sandbox', 'shell', id], {
      name: 'xterm-256color',
      cols: 80,
      rows: 24,
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: tmp, SVC_KEY: key, SVC_CONFIG_DIR: join(tmp, 'config') },
    });
    const screen = watch(term);
    try {
      term.write('echo hello-$((6*7))\r');
      await screen.match(/hello-42/);
      term.write("stty size | sed 's/^/SIZE:/'\r");
      expect((await screen.match(/SIZE:\d+ \d+/))[0]).toBe('SIZE:24 80');
      const mark = screen.text.length;
      term.resize(100, 30); // SIGWINCH to the CLI, which sends a resize frame
      await until('the resize reached the sandbox', async () => {
        term.write("stty size | sed 's/^/SIZE:/'\r");
        const sizes = [...screen.text.slice(mark).matchAll(/SIZE:(\d+ \d+)/g)].map((m) => m[1]);
        return sizes.includes('30 100');
      });

      term.write('sleep 30; echo slept-$((1+1))\r');
      await until('the sleep runs', async () => (await ps(id)).includes('sleep 30'));
      term.write('\x03'); // the CLI's terminal is raw: ^C is a keystroke for the sandbox, not SIGINT for the CLI
      term.write('echo after-$((2+3))\r');
      await screen.match(/after-5/);
      expect(screen.text).not.toContain('slept-2');
      expect(screen.exited).toBe(null);

      term.write('exit 5\r');
      expect(await screen.exit).toBe(5);
      expect(screen.text).toMatch(/exit 5 {2}\d+\.\d\d s {2}receipt \S+ {2}cost \$\d+\.\d+/);
    } finally {
      if (screen.exited === null) term.kill();
    }
  }, 90_000);

  it('snapshot prints its id; rm stops the session; a missing session or no key is one line and a non-zero exit', async () => {
    const snap = await svc(['sandbox', 'snapshot', id]);
    expect(snap.code, snap.stderr).toBe(0);
    expect(snap.stdout).toMatch(/^snap_\w+\n$/);
    const rm = await svc(['sandbox', 'rm', id]);
    expect({ code: rm.code, stdout: rm.stdout }).toEqual({ code: 0, stdout: `${id} stopped\n` });
    expectOneLineError(await svc(['sandbox', 'exec', id, '--', 'true']), 1, new RegExp(`^error: sandbox session ${id}: .*stopped; open one with \`svc sandbox open\``));
    expectOneLineError(await svc(['sandbox', 'ls', 'sbx_missing']), 1, /^error: no sandbox session sbx_missing .*; open one with `svc sandbox open`/);
    expectOneLineError(await svc(['sandbox', 'open'], { key: null }), 4, /^error: no API key given; set SVC_KEY/);
    const shell = await svc(['sandbox', 'shell', 'sbx_missing']);
    expectOneLineError(shell, 2, /^error: svc sandbox shell needs a terminal/);
  });
});

describe.skipIf(!enabled)('svc files and svc batches', () => {
  it('files upload prints the file id', async () => {
    const f = local('lines.jsonl', jsonl([chatLine('a'), chatLine('b')]));
    const r = await svc(['files', 'upload', f]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^file-\S+\n$/);
    expect(r.stderr).not.toContain('\r'); // no progress bar where stderr is not a terminal

    // On a terminal a large file gets a progress bar of bytes on stderr, and stdout still has only the id.
    const big = local('big.jsonl', jsonl(Array.from({ length: 16_000 }, (_, i) => chatLine(`q${i}`))));
    const term = ptySpawn(process.execPath, [join(ROOT, 'cli/bin/svc.js'), '--url', t.url, 'files', 'upload', big], {
      cols: 120,
      rows: 24,
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: tmp, SVC_KEY: key, SVC_CONFIG_DIR: join(tmp, 'config') },
    });
    const screen = watch(term);
    expect(await screen.exit).toBe(0);
    expect(screen.text).toMatch(/uploading big\.jsonl \[#{30}\] 100% {2}\d\.\d MiB of \d\.\d MiB/);
    expect(screen.text).toMatch(/\x1b\[2Kfile-[\w-]+\r\n/); // the bar erased, then the id
  });

  it('batches create --wait runs bare request bodies as a batch and writes its output file', async () => {
    const input = local('questions.jsonl', ['one', 'two', 'three'].map((q) => JSON.stringify({ messages: [{ role: 'user', content: q }] })).join('\n') + '\n');
    const run = svc(['--json', 'batches', 'create', input, '--model', 'test-chat', '--wait', '--poll', '0.1', '-o', join(tmp, 'answers.jsonl')]);
    let done = false;
    void run.finally(() => (done = true));
    // Batches run on the leader's loop, which the test gateway does not time: run it until the CLI has its answer.
    await until('the batch ended and the CLI exited', async () => (done ? true : (await t.gw.leader.runAllOnce(), false)), 60_000);
    const r = await run;
    expect(r.code, r.stderr).toBe(0);
    const answer = JSON.parse(r.stdout) as { status: string; output_path: string; request_counts: { completed: number } };
    expect(answer).toMatchObject({ status: 'completed', output_path: join(tmp, 'answers.jsonl'), request_counts: { total: 3, completed: 3, failed: 0 } });
    const lines = readFileSync(answer.output_path, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((l) => l.custom_id)).toEqual(['line-1', 'line-2', 'line-3']);
    expect(lines.every((l) => l.response.status_code === 200 && l.receipt.id)).toBe(true);
  }, 90_000);

  it('a file that is not JSONL, or names no model, is one line and exit 2 before anything is sent', async () => {
    const bad = local('bad.jsonl', '{"messages":[]}\nnot json\n');
    expectOneLineError(await svc(['batches', 'create', bad, '--model', 'test-chat']), 2, /^error: \S*bad\.jsonl is not JSONL: line 2 is not JSON/);
    const noModel = local('nomodel.jsonl', '{"messages":[{"role":"user","content":"hi"}]}\n');
    expectOneLineError(await svc(['batches', 'create', noModel]), 2, /^error: \S*nomodel\.jsonl line 1 names no model; pass --model M/);
    expectOneLineError(await svc(['batches', 'create', join(tmp, 'absent.jsonl'), '--model', 'm']), 2, /^error: cannot read \S*absent\.jsonl: no such file or directory/);
  });
});

/** What a pty shows (ANSI sequences kept), and the exit of its program. */
function watch(term: IPty) {
  const w = {
    text: '',
    exited: null as number | null,
    exit: new Promise<number>((resolve) => term.onExit((e) => resolve((w.exited = e.exitCode)))),
    match: (re: RegExp) => until(`${re} on the terminal`, async () => re.exec(w.text) ?? undefined, 30_000),
  };
  term.onData((d) => (w.text += d));
  return w;
}
