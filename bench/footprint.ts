/**
 * Footprint bench: what one gateway process costs to boot and to keep, against Portkey's AI gateway
 * (`@portkey-ai/gateway`, the dev dependency bench/inference.ts measures against) in the same run.
 *
 *   npx tsx bench/footprint.ts [--seconds 20] [--idle 10] [--conc 64] [--pg postgres://...] [--only pg,embedded,portkey] [--node-flags "--max-semi-space-size=64"] [--command "<node arguments>"]
 *
 * For this gateway on the Postgres server and on the embedded database (PGlite), each as production runs it
 * (`node --enable-source-maps control-plane/dist/main.js`, the command of `npm start`, the systemd unit and the
 * image; built first when a source is newer than the build):
 *   - cold boot: spawn to the first 200 from /readyz on a new database (every migration runs);
 *   - warm boot: the same again after a clean stop, on the now-migrated database;
 *   - idle RSS: the process's resident memory (VmRSS, every thread: the signer's worker, the embedded database)
 *     `--idle` seconds after ready, before any request;
 *   - load: `--seconds` of non-streamed chat completions at concurrency `--conc` against the zero-latency upstream
 *     of bench/inference.ts (an API key of a signed-in account; billing not enforced, as `npm start` runs),
 *     then the RSS right after and the req/s.
 * Portkey gets the same: boot to its first answered chat completion (it has no readiness route), idle RSS, load.
 * Ratios are to Portkey's figure of the same run (this VM's speed drifts by tens of percent within a minute).
 * `--command "<node arguments>"` runs the gateway with other arguments than `npm start`'s.
 * Load comes from wrk (apt-get install wrk) when installed, else Node's client in this process (`--requests`).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { arg } from './args.ts';
import { freePort, MODEL } from './inference-roles.ts';
import { loadNode, loadWrk, type LoadRow } from './load.ts';
import { startPortkey, startRole } from './reference.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SECONDS = Number(arg('seconds', '20'));
const IDLE_SECONDS = Number(arg('idle', '10'));
const CONC = Number(arg('conc', '64'));
const ADMIN = arg('pg', 'postgres://postgres@127.0.0.1:5432/postgres');
const ONLY = arg('only', 'pg,embedded,portkey').split(',');
/** Extra node flags for the gateway (`--node-flags "--max-semi-space-size=64"`: what a heap flag costs and buys). */
const NODE_FLAGS = arg('node-flags', '').split(' ').filter(Boolean);
const CLIENT = arg('client', spawnSync('wrk', ['--version']).error ? 'node' : 'wrk');
const TOTAL = Number(arg('requests', '40000'));
const BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 16 });
/** The targets, as written for this figure: ratios to Portkey's, or absolute milliseconds. */
const TARGETS = { warmBootMs: 2000, coldBootMs: 5000, idleRatio: 2, loadRatio: 2, embeddedIdleMb: 395 };

type Row = { name: string; coldMs?: number; warmMs: number; idleMb: number; loadMb: number; rps: number };

const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The load's req/s; NaN (printed as such) when requests failed or timed out, which a loaded machine can cause. */
const load = (url: string, headers: Record<string, string>): Promise<number> =>
  (CLIENT === 'wrk' ? loadWrk(url, BODY, headers, CONC, SECONDS, undefined, ['--timeout', '10s']) : loadNode(url, BODY, headers, CONC, TOTAL)).then(
    (row: LoadRow) => row.rps,
    (e: unknown) => (console.error(`load at ${url}: ${e instanceof Error ? e.message : e}`), Number.NaN),
  );

/**
 * The `start` script's node flags and entry point (package.json), as `npm start` runs the gateway; `--command`
 * replaces them (e.g. `--command "--max-semi-space-size=64 --import tsx control-plane/src/main.ts"`, the sources).
 */
function startCommand(): string[] {
  const command = arg('command', '');
  if (command) return [...NODE_FLAGS, ...command.split(' ').filter(Boolean)];
  const start = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(' ');
  if (start[0] !== 'node') throw new Error(`npm start runs ${start[0]}, not node`);
  return [...NODE_FLAGS, ...start.slice(1)];
}

/** One boot of the built gateway: spawn to the first 200 from /readyz. */
async function boot(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; ms: number }> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const child = spawn(process.execPath, startCommand(), {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), SVC_PUBLIC_URL: url, SVC_LOG_LEVEL: 'warn', SVC_LOCAL_AGENT: 'off', ...env },
  });
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}`);
    if (await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false)) break;
    if (performance.now() - t0 > 120_000) throw new Error('the gateway was not ready within 120 s');
    await sleep(10);
  }
  return { child, url, ms: performance.now() - t0 };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/** Cold boot, stop, warm boot, idle, load: one configuration of this gateway. */
async function measureGateway(name: string, env: Record<string, string>): Promise<Row> {
  const cold = await boot(env);
  await stop(cold.child);
  const warm = await boot(env);
  try {
    await sleep(IDLE_SECONDS * 1000);
    const idleMb = rssMb(warm.child.pid!);
    const anon = new SvcClient({ baseUrl: warm.url });
    const { client } = await anon.signIn(privateKeyToAccount(generatePrivateKey()));
    const key = (await client.createKey()).key;
    const rps = await load(`${warm.url}/v1`, { authorization: `Bearer ${key}` });
    return { name, coldMs: cold.ms, warmMs: warm.ms, idleMb, loadMb: rssMb(warm.child.pid!), rps };
  } finally {
    await stop(warm.child);
  }
}

async function main(): Promise<void> {
  const built = spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale', 'control-plane'], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error('the build failed');
  const upstream = await startRole('upstream', []);
  const upstreamUrl = `http://127.0.0.1:${upstream.info.port}/v1`;
  const providers = JSON.stringify([{ name: 'bench', base_url: upstreamUrl, models: [{ id: MODEL, input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 2_000_000 }] }]);
  const rows: Row[] = [];
  const cleanups: Array<() => Promise<unknown> | void> = [() => void upstream.child.kill()];
  try {
    if (ONLY.includes('portkey')) {
      const ref = await startPortkey(upstreamUrl, BODY);
      if (ref) {
        cleanups.push(() => stop(ref.child));
        await sleep(IDLE_SECONDS * 1000);
        const idleMb = rssMb(ref.child.pid!);
        const rps = await load(ref.url, ref.headers);
        rows.push({ name: 'Portkey 1.15 (Node server)', warmMs: ref.bootMs, idleMb, loadMb: rssMb(ref.child.pid!), rps });
        await stop(ref.child);
      }
    }
    if (ONLY.includes('pg')) {
      const name = `svc_footprint_${Math.random().toString(36).slice(2, 10)}`;
      const admin = new pg.Client({ connectionString: ADMIN });
      await admin.connect();
      await admin.query(`create database ${name}`);
      cleanups.push(async () => (await admin.query(`drop database if exists ${name} with (force)`), await admin.end()));
      const url = new URL(ADMIN);
      url.pathname = `/${name}`;
      const dataDir = mkdtempSync(join(tmpdir(), 'svc-footprint-'));
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
      rows.push(await measureGateway('this gateway, Postgres', { DATABASE_URL: url.toString(), SVC_DATA_DIR: dataDir, SVC_PROVIDERS: providers }));
    }
    if (ONLY.includes('embedded')) {
      const dataDir = mkdtempSync(join(tmpdir(), 'svc-footprint-'));
      cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
      rows.push(await measureGateway('this gateway, embedded (PGlite)', { SVC_DATA_DIR: dataDir, SVC_PROVIDERS: providers }));
    }
  } finally {
    for (const c of cleanups.reverse()) await Promise.resolve().then(c).catch((e: unknown) => console.error(`cleanup: ${e instanceof Error ? e.message : e}`));
  }
  print(rows);
}

function print(rows: Row[]): void {
  const ref = rows.find((r) => r.name.startsWith('Portkey'));
  const ratio = (v: number, of: number | undefined) => (of ? ` (${(v / of).toFixed(2)}x)` : '');
  console.log(`footprint bench: node ${process.version}${NODE_FLAGS.length ? `, gateway flags ${NODE_FLAGS.join(' ')}` : ''}; load: ${CLIENT}, ${CLIENT === 'wrk' ? `${SECONDS} s` : `${TOTAL} requests`} at c=${CONC}; idle RSS ${IDLE_SECONDS} s after ready; ratios to Portkey in this run`);
  console.log('| figure | ' + rows.map((r) => r.name).join(' | ') + ' |');
  console.log('|---|' + rows.map(() => '---|').join(''));
  const line = (label: string, f: (r: Row) => string) => console.log(`| ${label} | ${rows.map(f).join(' | ')} |`);
  line('cold boot to ready (migrations)', (r) => (r.coldMs === undefined ? '-' : `${(r.coldMs / 1000).toFixed(2)} s${ratio(r.coldMs, ref?.warmMs)}`));
  line('warm boot to ready', (r) => `${(r.warmMs / 1000).toFixed(2)} s${r === ref ? '' : ratio(r.warmMs, ref?.warmMs)}`);
  line(`idle RSS, ${IDLE_SECONDS} s after ready`, (r) => `${r.idleMb.toFixed(0)} MB${r === ref ? '' : ratio(r.idleMb, ref?.idleMb)}`);
  line(`RSS after ${SECONDS} s at c=${CONC}`, (r) => `${r.loadMb.toFixed(0)} MB${r === ref ? '' : ratio(r.loadMb, ref?.loadMb)}`);
  line(`req/s at c=${CONC}`, (r) => `${r.rps.toFixed(0)}${r === ref ? '' : ratio(r.rps, ref?.rps)}`);
  const pgRow = rows.find((r) => r.name.includes('Postgres'));
  const emb = rows.find((r) => r.name.includes('embedded'));
  const check = (what: string, met: boolean) => console.log(`target: ${what}: ${met ? 'met' : 'NOT met'}`);
  if (pgRow) {
    check(`warm boot on Postgres <= ${TARGETS.warmBootMs / 1000} s (${(pgRow.warmMs / 1000).toFixed(2)} s)`, pgRow.warmMs <= TARGETS.warmBootMs);
    check(`cold boot on Postgres <= ${TARGETS.coldBootMs / 1000} s (${(pgRow.coldMs! / 1000).toFixed(2)} s)`, pgRow.coldMs! <= TARGETS.coldBootMs);
    if (ref) {
      check(`idle RSS <= ${TARGETS.idleRatio}x Portkey's (${(pgRow.idleMb / ref.idleMb).toFixed(2)}x)`, pgRow.idleMb <= TARGETS.idleRatio * ref.idleMb);
      check(`RSS after load <= ${TARGETS.loadRatio}x Portkey's (${(pgRow.loadMb / ref.loadMb).toFixed(2)}x)`, pgRow.loadMb <= TARGETS.loadRatio * ref.loadMb);
    }
  }
  if (emb) check(`embedded idle RSS <= ${TARGETS.embeddedIdleMb} MB, half of the 790 MB it idled at when served through tsx (${emb.idleMb.toFixed(0)} MB)`, emb.idleMb <= TARGETS.embeddedIdleMb);
}

await main();
