#!/usr/bin/env node
// Prints the node_modules package directories (relative to a checkout, one per line) that the node agent
// loads at run time. install.sh copies exactly these into /opt/svc-node, so the host gets the agent's
// runtime closure (about 35 MB) rather than the whole workspace's node_modules (control plane, test tools,
// Solidity compiler: 300+ MB), and needs no registry.
//
// How: walk the static import graph from node-agent/bin/svc-node.js and node-agent/src/cli.ts through
// relative imports and the @svc/* workspace packages, collect the bare package names (type-only imports
// are erased at run time and skipped), add node-agent's declared dependencies, then close over each
// installed package's dependencies, optionalDependencies (when installed: the platform's esbuild binary)
// and required peerDependencies, resolving like Node does (nearest node_modules first). Optional peers and
// type-checking peers (typescript, @types/*) are never loaded at run time and are left out. A required
// package that is not installed is an error: run `npm ci` in the checkout first.
//
// Usage: node runtime-deps.mjs <checkout>
import { existsSync, lstatSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? '.');
const WORKSPACES = { '@svc/shared': join(root, 'shared'), '@svc/node-agent': join(root, 'node-agent') };
const builtins = new Set(builtinModules);

const fail = (msg) => {
  process.stderr.write(`runtime-deps: ${msg}\n`);
  process.exit(1);
};
const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));
const pkgName = (spec) => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');

function resolveFile(p) {
  for (const c of [p, `${p}.ts`, `${p}.js`, `${p}.mjs`, join(p, 'index.ts'), join(p, 'index.js')]) {
    if (existsSync(c) && statSync(c).isFile()) return c;
  }
  return undefined;
}

/** A workspace import ('@svc/shared', '@svc/shared/client') to its source file, through its exports map. */
function workspaceEntry(spec) {
  const name = pkgName(spec);
  const dir = WORKSPACES[name];
  const sub = `.${spec.slice(name.length)}`;
  const exp = readJson(join(dir, 'package.json')).exports ?? {};
  const target = typeof exp === 'string' ? (sub === '.' ? exp : undefined) : exp[sub];
  const file = typeof target === 'string' ? resolveFile(join(dir, target)) : undefined;
  if (!file) fail(`cannot resolve ${spec} in ${dir}`);
  return file;
}

const IMPORT = /(?:^|[;\s}])(import|export)\s+(type\s+)?(?:[\w*{}\s,$]*?\s*from\s*)?['"]([^'"]+)['"]/g;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

const bare = new Set(Object.keys(readJson(join(root, 'node-agent', 'package.json')).dependencies ?? {}));
const seen = new Set();
const queue = [join(root, 'node-agent', 'bin', 'svc-node.js'), join(root, 'node-agent', 'src', 'cli.ts')];
while (queue.length) {
  const file = queue.pop();
  if (seen.has(file)) continue;
  seen.add(file);
  const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const specs = [];
  for (const m of text.matchAll(IMPORT)) if (!m[2]) specs.push(m[3]);
  for (const m of text.matchAll(DYNAMIC)) specs.push(m[1]);
  for (const spec of specs) {
    if (spec.startsWith('.')) {
      const f = resolveFile(resolve(dirname(file), spec));
      if (f && !f.endsWith('.json')) queue.push(f);
    } else if (pkgName(spec) in WORKSPACES) {
      queue.push(workspaceEntry(spec));
    } else if (!spec.startsWith('node:') && !builtins.has(spec)) {
      bare.add(pkgName(spec));
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

const dirs = new Set();
const todo = [...bare].filter((n) => !(n in WORKSPACES)).map((name) => ({ name, from: root, optional: false, by: 'the node agent' }));
while (todo.length) {
  const { name, from, optional, by } = todo.pop();
  if (name in WORKSPACES) continue;
  const dir = locate(name, from);
  if (!dir) {
    if (optional) continue;
    fail(`${name} (needed by ${by}) is not installed under ${root}; run \`npm ci\` there first`);
  }
  if (lstatSync(dir).isSymbolicLink() || dirs.has(dir)) continue;
  dirs.add(dir);
  const pkg = readJson(join(dir, 'package.json'));
  const peerMeta = pkg.peerDependenciesMeta ?? {};
  const typesOnly = (d) => d === 'typescript' || d.startsWith('@types/');
  for (const d of Object.keys(pkg.dependencies ?? {})) todo.push({ name: d, from: dir, optional: false, by: name });
  for (const d of Object.keys(pkg.optionalDependencies ?? {})) todo.push({ name: d, from: dir, optional: true, by: name });
  for (const d of Object.keys(pkg.peerDependencies ?? {})) {
    if (!peerMeta[d]?.optional && !typesOnly(d)) todo.push({ name: d, from: dir, optional: false, by: name });
  }
}

// A package nested in another's node_modules travels with it; list only the outermost directories.
const sorted = [...dirs].sort();
const out = sorted.filter((d) => !sorted.some((o) => o !== d && d.startsWith(o + sep)));
process.stdout.write(out.map((d) => relative(root, d)).join('\n') + (out.length ? '\n' : ''));
