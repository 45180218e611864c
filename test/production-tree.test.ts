import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, TEST_DB_KIND, type TestDatabase } from './support/database.ts';
import { freePort } from './support/gateway.ts';

/**
 * The control-plane image's contents, proven where `docker build` cannot run (no registry here): the checkout's
 * node_modules (hard links, so nothing is downloaded or compiled) and its build output go through the image's
 * build-stage script (installers/control-plane/production-tree.sh: production dependencies only, compiled
 * addons reduced to their .node files), then this test performs the Dockerfile's own `COPY --from=build`
 * lines into an empty directory and boots what they copied, as the image's CMD runs it: built JavaScript,
 * no TypeScript, no tsx, against the Postgres server (`npm run test:pg`) or the embedded database.
 */
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DOCKERFILE = join(ROOT, 'installers/control-plane/Dockerfile');
const MANIFESTS = ['package.json', 'package-lock.json', 'shared/package.json', 'control-plane/package.json', 'node-agent/package.json', 'cli/package.json', 'console/package.json'];

const run = (cmd: string, args: string[], cwd: string) =>
  new Promise<{ code: number; out: string }>((done) =>
    execFile(cmd, args, { cwd, maxBuffer: 1 << 24, timeout: 300_000 }, (err, stdout, stderr) => done({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr })),
  );

/** The image's CMD, as the argv of a process. */
function imageCmd(): string[] {
  const line = readFileSync(DOCKERFILE, 'utf8').split('\n').find((l) => l.startsWith('CMD '));
  return JSON.parse(line!.slice(4)) as string[];
}

/** The runtime stage's `COPY --from=build /src/<from> <to>` lines, `to` relative to its WORKDIR. */
function runtimeCopies(): Array<{ from: string; to: string }> {
  return readFileSync(DOCKERFILE, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('COPY --from=build '))
    .map((l) => {
      const [from, to] = l.slice('COPY --from=build '.length).trim().split(/\s+/);
      return { from: relative('/src', from!), to: to! };
    });
}

let tmp: string;
let app: string;
let db: TestDatabase;
let child: ChildProcess | undefined;
let url: string;
let logs = '';

beforeAll(async () => {
  // The build output the image's build stage makes (npm ci's `prepare`); rebuilt only if a source changed.
  const built = await run(process.execPath, ['scripts/build.mjs', '--if-stale', 'console', 'control-plane'], ROOT);
  expect(built.code, built.out).toBe(0);
  tmp = mkdtempSync(join(tmpdir(), 'svc-production-tree-'));
  const stage = join(tmp, 'src');
  for (const f of MANIFESTS) {
    mkdirSync(dirname(join(stage, f)), { recursive: true });
    copyFileSync(join(ROOT, f), join(stage, f));
  }
  cpSync(join(ROOT, 'control-plane/dist'), join(stage, 'control-plane/dist'), { recursive: true });
  cpSync(join(ROOT, 'console/dist'), join(stage, 'console/dist'), { recursive: true });
  // Hard links where the file system allows (fast, no copy); npm only unlinks them and rewrites its own record.
  const linked = await run('cp', ['-al', join(ROOT, 'node_modules'), join(stage, 'node_modules')], ROOT);
  if (linked.code !== 0) {
    rmSync(join(stage, 'node_modules'), { recursive: true, force: true });
    cpSync(join(ROOT, 'node_modules'), join(stage, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  }
  const record = join(stage, 'node_modules/.package-lock.json');
  rmSync(record, { force: true });
  copyFileSync(join(ROOT, 'node_modules/.package-lock.json'), record);
  const pruned = await run('bash', [join(ROOT, 'installers/control-plane/production-tree.sh'), stage, '--offline'], ROOT);
  expect(pruned.code, pruned.out).toBe(0);

  app = join(tmp, 'app');
  mkdirSync(app);
  for (const { from, to } of runtimeCopies()) {
    const dest = to.endsWith('/') || to === '.' || to === './' ? join(app, to, from.split('/').pop()!) : join(app, to);
    mkdirSync(dirname(dest), { recursive: true });
    renameSync(join(stage, from), dest); // the stage is thrown away: moved, as fast as a copy is slow
  }

  db = await freshDatabase();
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  const [cmd, ...args] = imageCmd();
  expect(cmd).toBe('node');
  child = spawn(process.execPath, args, {
    cwd: app,
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(port),
      SVC_PUBLIC_URL: url,
      SVC_DATA_DIR: join(tmp, 'data'),
      SVC_LOCAL_AGENT: 'off',
      ...(db.url ? { DATABASE_URL: db.url } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (d) => (logs += d));
  child.stderr!.on('data', (d) => (logs += d));
  // A real process has to boot: poll its readiness (bounded: this catches a hang, not a slow machine).
  const deadline = Date.now() + 90_000;
  while (!(await fetch(`${url}/readyz`).then((r) => r.ok, () => false))) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the production tree did not come up:\n${logs}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 300_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
  }
  await db?.drop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const walk = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));

describe(`the control-plane image's production tree (${TEST_DB_KIND})`, () => {
  it('holds the built control plane and production dependencies only: no TypeScript sources, tsx, test tools or compiler objects', () => {
    expect(readdirSync(app).sort()).toEqual(['console', 'control-plane', 'node_modules', 'package.json']);
    expect(readdirSync(join(app, 'console'))).toEqual(['dist']);
    expect(readdirSync(join(app, 'control-plane')).sort()).toEqual(['dist', 'package.json']);
    const dist = walk(join(app, 'control-plane/dist')).map((f) => relative(join(app, 'control-plane/dist'), f));
    expect(dist).toContain('main.js');
    expect(dist).toContain('main.js.map');
    expect(dist).toContain('sign-worker.mjs');
    expect(dist.filter((f) => f.endsWith('.ts'))).toEqual([]);
    const modules = readdirSync(join(app, 'node_modules'));
    for (const m of ['fastify', 'pg', 'kysely', '@electric-sql', 're2js', 'secp256k1']) expect(modules).toContain(m);
    expect(modules).not.toContain('re2'); // caller patterns run in RE2JS (JavaScript): no regex addon to compile
    for (const m of ['tsx', 'vitest', '@portkey-ai', '@foundry-rs', 'solc', 'ethers', 'openai', 'playwright-core']) expect(modules).not.toContain(m);
    expect(existsSync(join(app, 'node_modules/@esbuild'))).toBe(false);
    // A compiled addon keeps only its .node files (node-pty's, and secp256k1's where a compiler built it).
    for (const pkg of ['node-pty', 'secp256k1']) {
      const build = join(app, 'node_modules', pkg, 'build');
      if (!existsSync(build)) continue;
      expect(readdirSync(build), pkg).toEqual(['Release']);
      for (const f of readdirSync(join(build, 'Release'))) expect(f, pkg).toMatch(/\.node$/);
    }
  });

  it("runs the image's CMD: built JavaScript, without tsx or a TypeScript loader", () => {
    const argv = readFileSync(`/proc/${child!.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    expect(argv.slice(1)).toEqual(imageCmd().slice(1));
    expect(argv.join(' ')).not.toMatch(/tsx|ts-node|strip-types|\.ts\b/);
  });

  it('answers: ready, its OpenAPI document, a page script bundled at build time, the console', async () => {
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    const doc = (await (await fetch(`${url}/openapi.json`)).json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toContain('/v1/chat/completions');
    const script = await fetch(`${url}/assets/verify.js`);
    expect(script.status).toBe(200);
    expect(await script.text()).toBe(readFileSync(join(app, 'control-plane/dist/browser/pages-verify-browser.js'), 'utf8'));
    const page = await fetch(`${url}/console`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<script type="module"[^>]* src="\/console\/assets\/[^"]+\.js"/);
    expect(logs).not.toMatch(/"level":(50|60)/);
  });

  it("loads the receipt signer's worker from the tree, with its native addon and WebAssembly", async () => {
    const worker = new Worker(pathToFileURL(join(app, 'control-plane/dist/sign-worker.mjs')), { workerData: { key: `0x${'11'.repeat(32)}`, prepared: true } });
    try {
      const answer = await new Promise<{ nonces: unknown[] }>((resolve, reject) => {
        worker.once('message', resolve);
        worker.once('error', reject);
        worker.postMessage({ nonces: 2 });
      });
      expect(answer.nonces).toHaveLength(2);
    } finally {
      await worker.terminate();
    }
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)));
    child!.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
