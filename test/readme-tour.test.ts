import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from './support/gateway.ts';
import { REAL_IMAGE, sandboxImage } from './support/needs.ts';
import { chatChunk, sse, startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * The README's tour, as a newcomer follows it: its commands are read from README.md (the fenced blocks of the
 * "A tour" section, in order) and run as written in a shell, in a new HOME and a directory that stands for the
 * fresh clone (its node_modules is this checkout's, so `npx svc` finds the `svc` npm install linked). The tour's
 * `npm start` line starts the gateway as `npm start` does (the built control-plane/dist/main.js, embedded
 * database in ./data) with the variables the line sets. Two substitutions only: the README's gateway at
 * localhost:8080 is the test's on a free port, and its local OpenAI-compatible server at 127.0.0.1:11434 a
 * scripted one speaking the same wire format. The sandbox run needs Docker and the sandbox image.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const MODEL = 'llama3:8b';
const ANSWER = 'Hello from the local server.';

/** The tour's commands: every line of its fenced sh blocks, continuation lines joined, comment lines dropped. */
function tourCommands(): string[] {
  const start = README.indexOf('\n## A tour');
  if (start < 0) throw new Error('README.md has no "## A tour" section');
  const end = README.indexOf('\n## ', start + 1);
  const section = README.slice(start, end < 0 ? undefined : end);
  const commands: string[] = [];
  for (const block of section.matchAll(/```sh\n([\s\S]*?)```/g)) {
    let pending = '';
    for (const line of block[1]!.split('\n')) {
      if (!pending && (line.trim() === '' || line.trimStart().startsWith('#'))) continue;
      if (line.endsWith('\\')) pending += `${line.slice(0, -1)} `;
      else {
        commands.push((pending + line).trim());
        pending = '';
      }
    }
  }
  return commands;
}

const commands = tourCommands();
const startLine = commands.find((c) => /\bnpm start\b/.test(c));
const docker = sandboxImage(REAL_IMAGE, 'the tour\'s sandbox run');

let up: ScriptedUpstream;
let home: string;
let clone: string;
let port: number;
let gateway: ChildProcess | undefined;
let bootLog = '';
const state = () => join(home, '.tour-env');

/** The README's command with the two substitutions (see above). */
const asHere = (cmd: string) => cmd.replaceAll('localhost:8080', `localhost:${port}`).replaceAll('http://127.0.0.1:11434/v1', up.url);

/**
 * Runs one tour command in bash, in the clone, with the variables earlier commands exported (asynchronously:
 * the scripted upstream answers from this process).
 */
function run(cmd: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const script = `set -o pipefail\n[ -f "$TOUR_ENV" ] && . "$TOUR_ENV" 2>/dev/null\n${asHere(cmd)}\nrc=$?\nexport -p > "$TOUR_ENV"\nexit $rc\n`;
  const child = spawn('bash', ['-c', script], {
    cwd: clone,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      PATH: process.env.PATH,
      HOME: home,
      TOUR_ENV: state(),
      // The tour's origin is the gateway's default (localhost:8080); here it is the test's port.
      SVC_URL: `http://localhost:${port}`,
      npm_config_update_notifier: 'false',
    },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 50_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? -1, stdout, stderr });
    }),
  );
}

/** The `VAR=value` words before `npm start` on the tour's start line. */
function startEnv(line: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const word of line.slice(0, line.indexOf('npm start')).trim().split(/\s+/).filter(Boolean)) {
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(word);
    if (!m) throw new Error(`the tour's start line has "${word}" before npm start`);
    env[m[1]!] = m[2]!;
  }
  return env;
}

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = (req, body, res) => {
    if (req.method === 'GET' && req.url?.endsWith('/models')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model', owned_by: 'local' }] }));
    }
    const usage = { prompt_tokens: 3, completion_tokens: 6, total_tokens: 9 };
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      return void res.end(sse(chatChunk(MODEL, ANSWER)) + sse(chatChunk(MODEL, null, 'stop')) + sse({ ...chatChunk(MODEL, null), choices: [], usage }) + sse('[DONE]'));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: MODEL, choices: [{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' }], usage }));
  };
  home = mkdtempSync(join(tmpdir(), 'svc-tour-home-'));
  clone = mkdtempSync(join(tmpdir(), 'svc-tour-clone-'));
  symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
  // What npm install's `prepare` built in a fresh clone (nothing to do when the build is current).
  execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale', 'control-plane', 'node-agent', 'cli'], { cwd: ROOT, stdio: 'pipe' });
  port = await freePort();
});

afterAll(async () => {
  if (gateway && gateway.exitCode === null) {
    const exited = new Promise((r) => gateway!.once('exit', r));
    gateway.kill('SIGTERM'); // stops the local node agent and its sandboxes too
    await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    if (gateway.exitCode === null) gateway.kill('SIGKILL');
  }
  await up?.close();
  for (const d of [home, clone]) if (d) rmSync(d, { recursive: true, force: true });
});

describe("the README's tour", () => {
  it('has the steps a newcomer follows: start, sign in, a key, a chat, a sandbox run', () => {
    expect(startLine, 'the tour starts the gateway with npm start').toBeDefined();
    for (const step of [/^npx svc wallet create\b/, /^npx svc login\b/, /^npx svc --json status\b/, /^npx svc keys create\b/, /^npx svc chat\b/, /^curl .*\/v1\/chat\/completions/, /^npx svc run\b/]) {
      expect(commands.some((c) => step.test(c)), `${step} in ${JSON.stringify(commands)}`).toBe(true);
    }
    for (const c of commands) expect(c, 'no secret on a command line').not.toMatch(/sk-svc_[A-Za-z0-9]{8,}|0x[0-9a-f]{64}/);
  });

  it('starts the gateway as npm start does, listing the local server\'s models', async () => {
    const env = startEnv(startLine!);
    const start = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.start as string;
    const args = start.split(/\s+/).slice(1).map((a) => (a.endsWith('.js') ? join(ROOT, a) : a)); // node [flags] control-plane/dist/main.js
    gateway = spawn(process.execPath, args, {
      cwd: clone, // ./data is the clone's
      env: {
        PATH: process.env.PATH,
        HOME: home,
        PORT: String(port),
        SVC_LOG_FORMAT: 'json',
        // The local sandbox node's containers: the image the README builds, one warm one.
        SVC_SANDBOX_IMAGE: REAL_IMAGE,
        SVC_SANDBOX_POOL: '1',
        ...(docker ? {} : { SVC_LOCAL_AGENT: 'off' }),
        ...Object.fromEntries(Object.entries(env).map(([k, v]) => [k, asHere(v)])),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    gateway.stdout!.setEncoding('utf8').on('data', (d: string) => (bootLog += d));
    gateway.stderr!.setEncoding('utf8').on('data', (d: string) => (bootLog += d));
    const deadline = Date.now() + 80_000;
    while (!(await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false))) {
      if (gateway.exitCode !== null) throw new Error(`the gateway exited ${gateway.exitCode}: ${bootLog.slice(-2000)}`);
      if (Date.now() > deadline) throw new Error(`the gateway was not ready in 80 s: ${bootLog.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(existsSync(join(clone, 'data'))).toBe(true);
    // The boot log line the tour promises: the models listed, priced at zero.
    const deadlineModels = Date.now() + 10_000;
    while (!/priced at zero/.test(bootLog) && Date.now() < deadlineModels) await new Promise((r) => setTimeout(r, 100));
    expect(bootLog).toMatch(new RegExp(`models from GET ${up.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/models.*all priced at zero \\(${MODEL}\\)`));
  }, 90_000);

  for (const cmd of commands.filter((c) => c !== startLine)) {
    const sandbox = /^npx svc run\b/.test(cmd);
    it.skipIf(sandbox && !docker)(cmd.replace(/\s+#.*$/, ''), async () => {
      expect(gateway?.exitCode, 'the gateway is running').toBeNull();
      const r = await run(cmd);
      expect(r.code, `${cmd}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`).toBe(0);
      if (/^npx svc wallet create\b/.test(cmd)) {
        expect(r.stdout).toMatch(/0x[0-9a-fA-F]{40}/);
        expect(statSync(join(home, '.config/svc/wallet.key')).mode & 0o777).toBe(0o600);
      }
      if (/^npx svc login\b/.test(cmd)) expect(statSync(join(home, '.config/svc/sessions.json')).mode & 0o777).toBe(0o600);
      if (/^npx svc --json status\b/.test(cmd)) {
        // Nothing but the JSON on stdout: no banner, no progress.
        const status = JSON.parse(r.stdout) as { gateway: { status: string }; session: { signed_in: boolean } };
        expect(status).toMatchObject({ gateway: { status: 'ok' }, session: { signed_in: true } });
      }
      if (/^npx svc keys create\b/.test(cmd)) {
        const file = /--secret-file (\S+)/.exec(cmd)?.[1];
        expect(file, 'the key goes to a file').toBeDefined();
        const secret = readFileSync(join(clone, file!), 'utf8').trim();
        expect(secret).toMatch(/^sk-svc_/);
        expect(statSync(join(clone, file!)).mode & 0o777).toBe(0o600);
        expect(r.stdout + r.stderr).not.toContain(secret);
      }
      if (/^npx svc chat\b/.test(cmd)) {
        expect(r.stdout).toContain(ANSWER);
        expect(r.stderr).toMatch(/receipt/);
      }
      if (/^curl .*\/v1\/chat\/completions/.test(cmd)) {
        expect(r.stdout).toMatch(/^x-svc-receipt: /im);
        expect(r.stdout).toMatch(/^x-svc-signature: 0x[0-9a-f]{130}/im);
        expect(r.stdout).toContain(ANSWER);
      }
      if (sandbox) expect(r.stdout.trim()).toBe('42');
    }, 60_000);
  }

});
