#!/usr/bin/env node
// Prints the node_modules package directories (relative to a checkout, one per line) that the built node
// agent loads at run time. install.sh copies exactly these into /opt/svc-node, so the host gets the agent's
// runtime closure (48 MB installed) rather than the whole workspace's node_modules (control plane, test tools,
// Solidity compiler: 300+ MB), and needs no registry.
//
// How: read the agent's build output (node-agent/dist/*.js, written by scripts/build.mjs: the project's own
// code is bundled in, every package it loads is left as an import), collect the bare package names it
// imports (static and dynamic imports, and createRequire(...)('x') calls), then close over each installed
// package's dependencies, optionalDependencies (when installed: the platform's esbuild binary) and required
// peerDependencies, resolving like Node does (nearest node_modules first). Optional peers and type-checking
// peers (typescript, @types/*) are never loaded at run time and are left out. A required package that is not
// installed is an error: run `npm ci` in the checkout first (it builds the agent too).
//
// Usage: node runtime-deps.mjs <checkout>
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? '.');
const builtins = new Set(builtinModules);

const fail = (msg) => {
  process.stderr.write(`runtime-deps: ${msg}\n`);
  process.exit(1);
};
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));
const pkgName = (spec) => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');

const IMPORTS = [
  /(?:^|[;\s}])(?:import|export)\s*(?:[\w*{}\s,$]*?\s*from\s*)?['"]([^'"]+)['"]/g,
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
  /\bcreateRequire\([^)]*\)\(\s*['"]([^'"]+)['"]\s*\)/g,
];

const dist = join(root, 'node-agent', 'dist');
if (!existsSync(join(dist, 'svc-node.js'))) fail(`${dist}/svc-node.js is missing: build the agent first (npm run build; npm ci runs it)`);
const bare = new Set();
for (const name of readdirSync(dist).filter((f) => /\.m?js$/.test(f))) {
  const text = readFileSync(join(dist, name), 'utf8');
  for (const re of IMPORTS) {
    for (const m of text.matchAll(re)) {
      const spec = m[1];
      if (!spec.startsWith('.') && !spec.startsWith('node:') && !builtins.has(spec)) bare.add(pkgName(spec));
    }
  }
}

/** Where `name` resolves from `fromDir`: the nearest node_modules/<name>, up to the checkout. */
function locate(name, fromDir) {
  for (let d = fromDir; ; d = dirname(d)) {
    const c = join(d, 'node_modules', name);
    if (existsSync(join(c, 'package.json'))) return c;
    if (d === root || !d.startsWith(root)) return undefined;
  }
}

const typesOnly = (d) => d === 'typescript' || d.startsWith('@types/');
const dirs = new Set();
const todo = [...bare].map((name) => ({ name, from: root, optional: false, by: 'the node agent' }));
while (todo.length) {
  const { name, from, optional, by } = todo.pop();
  const dir = locate(name, from);
  if (!dir) {
    if (optional) continue;
    fail(`${name} (needed by ${by}) is not installed under ${root}; run \`npm ci\` there first`);
  }
  if (lstatSync(dir).isSymbolicLink() || dirs.has(dir)) continue;
  dirs.add(dir);
  const pkg = readJson(join(dir, 'package.json'));
  const peerMeta = pkg.peerDependenciesMeta ?? {};
  // Type declarations (@types/node is a dependency of some packages) are never loaded at run time.
  for (const d of Object.keys(pkg.dependencies ?? {})) if (!typesOnly(d)) todo.push({ name: d, from: dir, optional: false, by: name });
  for (const d of Object.keys(pkg.optionalDependencies ?? {})) todo.push({ name: d, from: dir, optional: true, by: name });
  for (const d of Object.keys(pkg.peerDependencies ?? {})) {
    if (!peerMeta[d]?.optional && !typesOnly(d)) todo.push({ name: d, from: dir, optional: false, by: name });
  }
}

// A package nested in another's node_modules travels with it; list only the outermost directories.
const sorted = [...dirs].sort();
const out = sorted.filter((d) => !sorted.some((o) => o !== d && d.startsWith(o + sep)));
process.stdout.write(out.map((d) => relative(root, d)).join('\n') + (out.length ? '\n' : ''));
