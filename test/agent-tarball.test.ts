import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_VERSION, PACKAGE_NODE_VERSION, agentPackages, sh } from './support/agent-package.ts';
import { tool } from './support/needs.ts';

/**
 * The node agent's tarball, extracted into an empty directory and run from there with no other Node.js on
 * PATH: it carries its runtime, its bundled JavaScript and the native addon built for that runtime.
 */
const enabled = tool('dpkg-deb', 'apt-get install dpkg (Debian has it)', 'the node agent packages');
let dir: string;
let tree: string;
/** A PATH holding only what the launcher uses (sh, readlink, dirname): no node anywhere on it. */
let bare: string;

const walk = (d: string): string[] => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : [join(d, e.name)]));

beforeAll(() => {
  if (!enabled) return;
  const { tarball } = agentPackages();
  dir = mkdtempSync(join(tmpdir(), 'svc-tarball-'));
  mkdirSync(join(dir, 'opt'));
  expect(sh('tar', ['-xzf', tarball, '-C', join(dir, 'opt')]).code).toBe(0);
  tree = join(dir, 'opt', 'svc-node');
  bare = join(dir, 'path');
  mkdirSync(bare);
  for (const c of ['sh', 'readlink', 'dirname']) symlinkSync(sh('sh', ['-c', `command -v ${c}`]).stdout.trim(), join(bare, c));
}, 600_000);
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe.skipIf(!enabled)('the node agent tarball', () => {
  it('extracts to one svc-node/ tree holding only what runs, at most 60 MB packed', () => {
    expect(statSync(agentPackages().tarball).size).toBeLessThanOrEqual(60 * 1024 * 1024);
    expect(readdirSync(join(dir, 'opt'))).toEqual(['svc-node']);
    expect(readdirSync(tree).sort()).toEqual(['BUILD-INFO', 'bin', 'dist', 'install.sh', 'node_modules', 'package.json', 'runtime', 'sandbox-image', 'svc-node.service']);
    const files = walk(tree).map((f) => relative(tree, f));
    expect(readdirSync(join(tree, 'node_modules'))).toEqual(['node-pty']);
    expect(files.filter((f) => /\.(ts|map|h|gyp|cc)$/.test(f) || f.includes('include/') || f.includes('/test'))).toEqual([]);
    expect(files).toContain('node_modules/node-pty/build/Release/pty.node');
  });

  it('runs `svc-node --version` from any directory and through a symlink, with PATH holding no other Node.js', () => {
    const env = { PATH: bare };
    expect(sh('sh', ['-c', 'command -v node || echo none'], { env }).stdout.trim()).toBe('none');
    expect(sh(join(tree, 'bin', 'svc-node'), ['--version'], { env, cwd: '/' })).toMatchObject({ code: 0, stdout: `${AGENT_VERSION}\n` });
    const link = join(dir, 'usr-local-bin');
    mkdirSync(link);
    symlinkSync(join(tree, 'bin', 'svc-node'), join(link, 'svc-node'));
    expect(sh('svc-node', ['--version'], { env: { PATH: `${link}:${bare}` }, cwd: tmpdir() })).toMatchObject({ code: 0, stdout: `${AGENT_VERSION}\n` });
  });

  it('carries the pinned Node.js runtime, and node-pty built for it opens a pseudo terminal', () => {
    const node = join(tree, 'runtime', 'node');
    expect(sh(node, ['-p', 'process.versions.node']).stdout.trim()).toBe(PACKAGE_NODE_VERSION);
    const script = `const pty = require(${JSON.stringify(join(tree, 'node_modules', 'node-pty'))}); const t = pty.spawn('/bin/sh', ['-c', 'test -t 0 && test -t 1 && echo pty-ok'], {}); let out = ''; t.onData((d) => (out += d)); t.onExit((e) => { console.log(JSON.stringify({ out, code: e.exitCode })); });`;
    const r = sh(node, ['-e', script], { env: { PATH: bare } });
    expect(r.code).toBe(0);
    const got = JSON.parse(r.stdout) as { out: string; code: number };
    expect(got.code).toBe(0);
    expect(got.out).toContain('pty-ok');
  });

  it('answers `svc-node doctor --json` with exit 1 and what to do when it is not enrolled', () => {
    const r = sh(join(tree, 'bin', 'svc-node'), ['doctor', '--json', '--config-dir', join(dir, 'no-config')], { env: { PATH: bare, SVC_DOCKER_SOCKET: join(dir, 'no.sock') } });
    expect(r.code).toBe(1);
    const report = JSON.parse(r.stdout) as { ok: boolean; checks: Array<{ name: string; ok: boolean; fix?: string }> };
    expect(report.ok).toBe(false);
    expect(report.checks.find((c) => c.name === 'config')).toMatchObject({ ok: false, fix: expect.stringContaining('svc-node enroll') });
    expect(report.checks.find((c) => c.name === 'image')?.fix).toContain(join(tree, 'sandbox-image', 'build.sh'));
  });
});
