#!/usr/bin/env node
// The production build: one esbuild step per target, each writing JavaScript with source maps into its
// package's dist/ (gitignored). Plain JavaScript run by node, so a fresh clone builds right after `npm install`
// (the `prepare` script) without tsx.
//
//   node scripts/build.mjs              build every target
//   node scripts/build.mjs --if-stale   build only the targets whose output is missing or older than a source
//                                       file it was built from (`npm start` runs this first)
//   node scripts/build.mjs cli          build the named targets only
//
// Each target bundles the project's own TypeScript (the workspaces, @svc/*) into ES modules and leaves every
// package from node_modules external: native addons (re2, secp256k1, node-pty) and packages that read files
// beside their own code (PGlite's wasm and data files) load from node_modules as they do in development, and
// production dependencies stay what `npm ci --omit=dev` installs. Dynamic imports of the project's own modules
// become chunks in the same folder, loaded when first called.
//
// Files a module loads by URL (`new URL('./x', import.meta.url)`) are built beside the bundle, and the URL is
// rewritten to name the built file, since every chunk sits in the one output folder:
//   - a `*-browser.ts` entry (a page's script) is bundled for the browser, minified, into browser/<dir>-<name>.js;
//   - a `.mjs` file (a worker thread) is bundled for node as an entry of its own, <name>.mjs;
//   - another target's entry point is mapped to that target's output (the local node agent `npm start` spawns).
//   - a directory (`new URL('../x/', import.meta.url)`, e.g. the console's built assets) keeps naming the same
//     directory of the checkout, seen from the output folder.
// To add a target, add an entry to TARGETS. The web console is one too: a Vite build (console/vite.config.ts)
// into console/dist, which the control plane serves at /console.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { BROWSER_BUNDLE } from '../control-plane/src/http/browser-options.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const at = (p) => join(ROOT, p);
const NODE_TARGET = 'node20';
/** Recorded in each output folder: what was built from what, for --if-stale. */
const STAMP = 'build.json';

/**
 * @type {Array<{ name: string; dir: string; entries: Record<string, string>; vite?: string }>} entry output name ->
 * source; `vite`: the folder of a Vite project built into `dir` (its entry is its index.html)
 */
export const TARGETS = [
  { name: 'console', dir: 'console/dist', entries: { index: 'console/index.html' }, vite: 'console' },
  { name: 'control-plane', dir: 'control-plane/dist', entries: { main: 'control-plane/src/main.ts' } },
  { name: 'node-agent', dir: 'node-agent/dist', entries: { 'svc-node': 'node-agent/src/cli.ts' } },
  { name: 'cli', dir: 'cli/dist', entries: { svc: 'cli/src/main.ts' } },
];

/** The built file of every target's entry point, by absolute source path. */
const entryOutputs = new Map(TARGETS.filter((t) => !t.vite).flatMap((t) => Object.entries(t.entries).map(([out, src]) => [at(src), at(join(t.dir, `${out}.js`))])));
/** An entry's built file: `<name>.js`, or `<name>.html` for a Vite project. */
const outputFile = (t, name) => at(join(t.dir, `${name}.${t.vite ? 'html' : 'js'}`));

const BANNER = '// Built by scripts/build.mjs from the TypeScript sources; do not edit.';

/**
 * Pure-JavaScript packages bundled with the project's code instead of loaded from node_modules: the build
 * keeps only the parts the code uses (viem's index alone loads its whole library: every chain, ABI and
 * action). What they import is bundled with them, resolved from where they are installed.
 */
const INLINE = ['viem'];
const pkgName = (spec) => spec.split('/').slice(0, spec.startsWith('@') ? 2 : 1).join('/');
/** Only INLINE packages' files are ever read from node_modules, so what they import is theirs to bundle. */
const inlined = (importer) => importer.includes(`${sep}node_modules${sep}`);

/** Bare imports stay external, except the workspaces' own packages (@svc/*) and INLINE, which are bundled. */
const externalPackages = {
  name: 'external-packages',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (a) => {
      if (a.path.startsWith('@svc/') || a.path.startsWith('node:') || INLINE.includes(pkgName(a.path)) || inlined(a.importer)) return undefined;
      return { path: a.path, external: true };
    });
  },
};

const URL_REF = /new URL\((['"])(\.{1,2}\/[^'"]+)\1,\s*import\.meta\.url\)/g;

/** Rewrites `new URL('./x', import.meta.url)` of the project's sources to the built file, and builds it (see top). */
function fileUrls(target, extraEntries, browserScripts) {
  return {
    name: 'file-urls',
    setup(build) {
      build.onLoad({ filter: /\.(ts|mjs)$/ }, (a) => {
        if (a.path.includes(`${sep}node_modules${sep}`)) return undefined;
        const text = readFileSync(a.path, 'utf8');
        if (!text.includes('import.meta.url')) return undefined;
        const contents = text.replace(URL_REF, (whole, q, ref) => {
          const file = resolve(dirname(a.path), ref);
          let out;
          if (ref.endsWith('/')) out = file; // a directory of the checkout (built or not yet)
          else if (!existsSync(file)) return whole; // an example in a comment
          else if (entryOutputs.has(file)) out = entryOutputs.get(file);
          else if (file.endsWith('-browser.ts')) {
            out = at(join(target.dir, 'browser', `${basename(dirname(file))}-${basename(file, '.ts')}.js`));
            browserScripts.set(file, out);
          } else if (file.endsWith('.mjs')) {
            out = at(join(target.dir, basename(file)));
            extraEntries.set(basename(file, '.mjs'), file);
          } else return whole; // a file that is not built (none today): left pointing at the source tree
          let rel = relative(at(target.dir), out).split(sep).join('/') + (ref.endsWith('/') ? '/' : '');
          if (!rel.startsWith('.')) rel = `./${rel}`;
          return `new URL(${q}${rel}${q}, import.meta.url)`;
        });
        return { contents, loader: a.path.endsWith('.mjs') ? 'js' : 'ts' };
      });
    },
  };
}

const nodeOptions = (target, plugins) => ({
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: NODE_TARGET,
  splitting: true,
  outdir: at(target.dir),
  outExtension: { '.js': '.js' },
  chunkNames: 'chunk-[hash]',
  // Whitespace and syntax minified (no comments; one-byte source text, which V8 keeps in memory for lazy
  // compilation), names kept: stack traces read as the source, and the source maps give the lines.
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  sourcesContent: false,
  legalComments: 'none',
  logLevel: 'warning',
  metafile: true,
  banner: { js: BANNER },
  plugins,
});


/** Records what was built from what (the project's own files), for --if-stale. */
function stamp(target, inputs, started) {
  const own = [...inputs].map((i) => relative(ROOT, resolve(ROOT, i))).filter((i) => !i.startsWith(`node_modules${sep}`) && !i.startsWith('..'));
  writeFileSync(at(join(target.dir, STAMP)), `${JSON.stringify({ target: target.name, built_at: new Date().toISOString(), inputs: own.sort() }, null, 1)}\n`);
  console.error(`built ${target.name} -> ${target.dir} (${own.length} source files, ${Math.round(performance.now() - started)} ms)`);
}

/** A Vite project (the console): its own config decides the output; the inputs are the modules it bundled. */
async function buildVite(target, started) {
  const { build } = await import('vite');
  const root = at(target.vite);
  const out = await build({ root, configFile: join(root, 'vite.config.ts'), logLevel: 'warn' });
  const inputs = new Set([join(root, 'index.html'), join(root, 'vite.config.ts'), join(root, 'package.json')]);
  for (const o of Array.isArray(out) ? out : [out]) {
    for (const chunk of o.output ?? []) for (const id of chunk.moduleIds ?? Object.keys(chunk.modules ?? {})) if (!id.startsWith('\0')) inputs.add(id.split('?')[0]);
  }
  stamp(target, inputs, started);
}

async function buildTarget(target) {
  const started = performance.now();
  if (target.vite) return buildVite(target, started);
  const extraEntries = new Map();
  const browserScripts = new Map();
  const entryPoints = Object.fromEntries(Object.entries(target.entries).map(([out, src]) => [out, at(src)]));
  const first = await esbuild.build({ ...nodeOptions(target, [externalPackages, fileUrls(target, extraEntries, browserScripts)]), entryPoints });
  const inputs = new Set(Object.keys(first.metafile.inputs));
  const outputs = new Set(Object.keys(first.metafile.outputs));
  // Workers: node ES modules of their own, with the same externals; their own URLs are rewritten the same way.
  const workerEntries = Object.fromEntries([...extraEntries].map(([name, file]) => [name, file]));
  if (Object.keys(workerEntries).length) {
    const w = await esbuild.build({ ...nodeOptions(target, [externalPackages, fileUrls(target, new Map(), browserScripts)]), entryPoints: workerEntries, outExtension: { '.js': '.mjs' }, chunkNames: 'worker-chunk-[hash]' });
    for (const i of Object.keys(w.metafile.inputs)) inputs.add(i);
    for (const o of Object.keys(w.metafile.outputs)) outputs.add(o);
  }
  for (const [file, out] of browserScripts) {
    const b = await esbuild.build({ ...BROWSER_BUNDLE, entryPoints: [file], outfile: out, metafile: true });
    for (const i of Object.keys(b.metafile.inputs)) inputs.add(i);
    for (const o of Object.keys(b.metafile.outputs)) outputs.add(o);
  }
  removeOthers(at(target.dir), new Set([...outputs].map((o) => resolve(ROOT, o))));
  stamp(target, inputs, started);
}

/**
 * Removes what an earlier build left in the output folder and this one did not write (chunks are named by
 * their content). The folder is written in place rather than wiped first, so a process running the previous
 * build keeps the chunks it shares with this one.
 */
function removeOthers(dir, keep) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) removeOthers(p, keep);
    else if (e.name !== STAMP && !keep.has(p)) rmSync(p, { force: true });
  }
}

/** True when the target's outputs are missing or a source file it was built from is newer (or gone). */
function stale(target) {
  const stampFile = at(join(target.dir, STAMP));
  if (!existsSync(stampFile)) return true;
  for (const out of Object.keys(target.entries)) if (!existsSync(outputFile(target, out))) return true;
  const built = statSync(stampFile).mtimeMs;
  const { inputs } = JSON.parse(readFileSync(stampFile, 'utf8'));
  const newer = (p) => !existsSync(at(p)) || statSync(at(p)).mtimeMs > built;
  return inputs.some(newer) || newer('package-lock.json') || newer('scripts/build.mjs');
}

async function main() {
  const args = process.argv.slice(2);
  const ifStale = args.includes('--if-stale');
  const names = args.filter((a) => !a.startsWith('--'));
  const unknown = names.filter((n) => !TARGETS.some((t) => t.name === n));
  if (unknown.length) throw new Error(`unknown target ${unknown.join(', ')}; targets: ${TARGETS.map((t) => t.name).join(', ')}`);
  const chosen = TARGETS.filter((t) => !names.length || names.includes(t.name));
  for (const t of chosen) {
    if (ifStale && !stale(t)) continue;
    mkdirSync(at(t.dir), { recursive: true });
    await buildTarget(t);
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`build failed: ${e instanceof Error ? e.message : e}`);
    process.exit(1);
  });
}
