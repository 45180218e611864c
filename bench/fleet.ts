/**
 * Fleet bench: the built gateway (as `npm start` runs it) on a new Postgres database, and N simulated nodes in a
 * few forked processes (bench/fleet-nodes.ts: the real channel protocol, the real 60-second heartbeat cadence
 * spread over the minute, sandbox jobs answered after a fixed delay). The fleet grows row by row (N = 100, 1,000,
 * 5,000, 10,000 by default); each row measures, once every node is connected and heartbeating:
 *   - gateway RSS per connected node (over the idle gateway's RSS, measured before any node), and the gateway's and
 *     Postgres' CPU per heartbeat over a window of heartbeats at the steady rate (N / 60 per second);
 *   - heartbeat answer p50/p99 over that window (timed by the simulated nodes);
 *   - dispatch: POST /v1/sandboxes to the job reaching its node (the node's arrival time, same machine clock),
 *     p50/p99, at 20 runs per second, and the whole call's p50;
 *   - GET /v1/nodes (public) and GET /v1/admin/nodes: answer size and time;
 *   - reconnect storm: kill -9 of the gateway, a restart, and the time until every node's hello is answered again;
 *     heartbeats and runs refused meanwhile (runs go on at 20 per second through the storm), and any run that
 *     reached a node twice.
 * With `--replicas 2` a second gateway process shares the database; the nodes are split between the two, and
 * dispatch is timed through each replica (half the runs reach nodes on the other one: the relay).
 * Loopback only; bounded counts; the bench stops its processes and drops its database at the end.
 *   npx tsx bench/fleet.ts [--rows 100,1000,5000,10000] [--workers 3] [--window 30] [--dispatch 10] [--rate 20]
 *     [--job-delay 20] [--storm true|false] [--replicas 1|2] [--ramp 250] [--gateway control-plane/dist/main.js]
 *     [--pg postgres://postgres@127.0.0.1:5432/postgres] [--profile DIR]
 * The fleet stops growing at the first row where more than a tenth of the heartbeats or half the runs failed, or
 * the nodes were not all back within 180 s of the restart (the machine's limit, printed with its reason).
 */
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { SvcClient } from '@svc/shared/client';
import { arg } from './args.ts';
import { processCpuSeconds } from './cpu.ts';
import { freePort } from './inference-roles.ts';
import { percentile } from './load.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ROWS = arg('rows', '100,1000,5000,10000').split(',').map(Number);
const WORKERS = Number(arg('workers', '3'));
const WINDOW_S = Number(arg('window', '30'));
const DISPATCH_S = Number(arg('dispatch', '10'));
const RATE = Number(arg('rate', '20'));
const JOB_DELAY_MS = arg('job-delay', '20');
const STORM = arg('storm', 'true') === 'true';
const REPLICAS = Number(arg('replicas', '1'));
const ADMIN_PG = arg('pg', 'postgres://postgres@127.0.0.1:5432/postgres');
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const ENROLL_CONCURRENCY = 16;
/** Nodes dialling in per second while the fleet grows (all simulator processes together). */
const RAMP = Number(arg('ramp', '250'));
/** The gateway's entry point (relative to the repository); the default is built first if stale. */
const GATEWAY = arg('gateway', 'control-plane/dist/main.js');
/** A directory for the gateway's CPU profiles (node --cpu-prof; written when a gateway exits on SIGTERM). */
const PROFILE = arg('profile', '');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const epochMs = () => performance.timeOrigin + performance.now();
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

interface Gateway {
  child: ChildProcess;
  url: string;
  port: number;
}

async function boot(env: Record<string, string>, port?: number): Promise<Gateway & { ms: number }> {
  port ??= await freePort();
  const url = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const child = spawn(process.execPath, ['--enable-source-maps', ...(PROFILE ? ['--cpu-prof', '--cpu-prof-dir', PROFILE] : []), GATEWAY], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), SVC_PUBLIC_URL: url, SVC_LOG_LEVEL: 'error', SVC_LOCAL_AGENT: 'off', SVC_ADMIN_TOKEN: ADMIN_TOKEN, ...env },
  });
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the gateway exited with ${child.exitCode}`);
    if (await fetch(`${url}/readyz`).then((r) => r.status === 200, () => false)) break;
    if (performance.now() - t0 > 120_000) throw new Error('the gateway was not ready within 120 s');
    await sleep(20);
  }
  return { child, url, port, ms: performance.now() - t0 };
}

async function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill(signal);
  await exited;
}

interface WorkerStats {
  online: number;
  nodes: number;
  hb: number[];
  hbFailed: number;
  hbSent: number;
  /** Hellos answered (the node back on the channel), connections closed, hellos asked again on one connection. */
  readies: number;
  closes: number;
  helloRetries: number;
  rssMb: number;
}

let stopping = false;

/** A forked process of simulated nodes, dialling `url`. */
class Worker {
  readonly child: ChildProcess;
  private waiters: Array<(m: { t: string }) => void> = [];
  /** Why the process is gone, once it is. */
  ended: string | null = null;
  constructor(url: string, ramp: number, onJob: (run: string | null, node: string, at: number) => void) {
    this.child = fork(join(ROOT, 'bench/fleet-nodes.ts'), [], {
      execArgv: ['--import', 'tsx'],
      env: { PATH: process.env.PATH, FLEET_URL: url, FLEET_JOB_DELAY_MS: JOB_DELAY_MS, FLEET_RAMP: String(ramp), UV_THREADPOOL_SIZE: '2' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (m: { t: string; run?: string | null; node?: string; at?: number }) => {
      if (m.t === 'job') return onJob(m.run ?? null, m.node!, m.at!);
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f(m);
    });
    this.child.on('exit', (code, signal) => {
      this.ended = `a simulator process ended (${signal ?? code}); its nodes are gone`;
      if (!stopping) console.error(this.ended);
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f({ t: 'ended' });
    });
  }
  private next<T>(t: string): Promise<T> {
    return new Promise((resolve, reject) => {
      if (this.ended) return reject(new Error(this.ended));
      const wait = (m: { t: string }) => (m.t === 'ended' ? reject(new Error(this.ended!)) : m.t === t ? resolve(m as T) : this.waiters.push(wait));
      this.waiters.push(wait);
    });
  }
  ready = () => this.next('ready');
  async add(nodes: Array<{ id: string; key: string; index: number }>): Promise<void> {
    const done = this.next('added');
    this.child.send({ t: 'add', nodes });
    await done;
  }
  async stats(): Promise<WorkerStats> {
    const s = this.next<WorkerStats>('stats');
    this.child.send({ t: 'stats' });
    return s;
  }
  reset(): void {
    this.child.send({ t: 'reset' });
  }
}

async function allStats(workers: Worker[]): Promise<WorkerStats> {
  const all = await Promise.all(workers.map((w) => w.stats()));
  return all.reduce((a, s) => ({
    online: a.online + s.online,
    nodes: a.nodes + s.nodes,
    hb: a.hb.concat(s.hb),
    hbFailed: a.hbFailed + s.hbFailed,
    hbSent: a.hbSent + s.hbSent,
    readies: a.readies + s.readies,
    closes: a.closes + s.closes,
    helloRetries: a.helloRetries + s.helloRetries,
    rssMb: a.rssMb + s.rssMb,
  }));
}

async function untilOnline(workers: Worker[], n: number, limitMs: number): Promise<number | null> {
  const t0 = performance.now();
  let shown = 0;
  for (;;) {
    const s = await allStats(workers);
    if (s.online >= n) return performance.now() - t0;
    const took = performance.now() - t0;
    // The curve of nodes coming back, every 10 s (on stderr).
    if (took >= shown + 10_000) {
      shown += 10_000;
      console.error(`  ${(took / 1000).toFixed(0)} s: ${s.online} of ${n} online (hellos answered ${s.readies}, connections closed ${s.closes}, hellos asked again ${s.helloRetries})`);
    }
    if (took > limitMs) return null;
    await sleep(100);
  }
}

async function admin<T>(url: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(`${url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!res.ok) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as T;
}

/** Enrolls and approves `count` house nodes through the admin routes, ENROLL_CONCURRENCY at a time. */
async function enroll(url: string, count: number, from: number): Promise<Array<{ id: string; key: string; index: number }>> {
  const out: Array<{ id: string; key: string; index: number }> = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: ENROLL_CONCURRENCY }, async () => {
      while (next < count) {
        const i = from + next++;
        const e = await admin<{ node: { id: string }; node_key: string }>(url, '/v1/admin/nodes/enroll', { name: `sim-${i}`, kinds: ['sandbox'] });
        await admin(url, '/v1/admin/nodes/approve', { node_id: e.node.id, approved: true });
        out.push({ id: e.node.id, key: e.node_key, index: i });
      }
    }),
  );
  return out;
}

/** Runs dispatched so far: when each call started, its node's arrival times, and how each call ended. */
class Runs {
  private seq = 0;
  readonly started = new Map<string, number>();
  readonly arrived = new Map<string, number[]>();
  readonly ended = new Map<string, { ms: number; status: number }>();
  onJob = (run: string | null, _node: string, at: number) => {
    if (!run) return;
    const a = this.arrived.get(run) ?? [];
    a.push(at);
    this.arrived.set(run, a);
  };
  /** Paced runs at `rate` per second for `seconds` against `urls` in turn; returns the runs' ids. */
  async paced(urls: string[], key: string, seconds: number, rate = RATE): Promise<string[]> {
    const ids: string[] = [];
    const calls: Array<Promise<void>> = [];
    const t0 = performance.now();
    const total = Math.round(seconds * rate);
    for (let i = 0; i < total; i++) {
      const wait = t0 + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      const id = `r${this.seq++}`;
      ids.push(id);
      calls.push(this.one(urls[i % urls.length]!, key, id));
    }
    await Promise.all(calls);
    return ids;
  }
  private async one(url: string, key: string, id: string): Promise<void> {
    const t0 = performance.now();
    this.started.set(id, epochMs());
    let status = 0;
    try {
      const res = await fetch(`${url}/v1/sandboxes`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ language: 'sh', code: 'echo hi', env: { BENCH_RUN: id } }),
        signal: AbortSignal.timeout(30_000),
      });
      await res.arrayBuffer();
      status = res.status;
    } catch {
      status = 0;
    }
    this.ended.set(id, { ms: performance.now() - t0, status });
  }
  /** Dispatch latency (call start to the job at its node) of the runs that reached one, and the calls' times. */
  figures(ids: string[]) {
    const dispatch: number[] = [];
    const whole: number[] = [];
    let failed = 0;
    const statuses: Record<string, number> = {};
    for (const id of ids) {
      const at = this.arrived.get(id)?.[0];
      if (at !== undefined) dispatch.push(at - this.started.get(id)!);
      const e = this.ended.get(id);
      if (e && e.status === 200) whole.push(e.ms);
      else {
        failed++;
        statuses[String(e?.status ?? 'none')] = (statuses[String(e?.status ?? 'none')] ?? 0) + 1;
      }
    }
    return { dispatch, whole, failed, statuses };
  }
  /** The `k` slowest dispatches: their time, when each call started (from the first's start) and its place in `ids`. */
  slowest(ids: string[], k: number): Array<{ ms: number; at: number; index: number }> {
    const t0 = this.started.get(ids[0]!) ?? 0;
    return ids
      .map((id, index) => ({ id, index, at: this.arrived.get(id)?.[0] }))
      .filter((x) => x.at !== undefined)
      .map((x) => ({ ms: x.at! - this.started.get(x.id)!, at: this.started.get(x.id)! - t0, index: x.index }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, k);
  }
  twice(ids: string[]): number {
    return ids.filter((id) => (this.arrived.get(id)?.length ?? 0) > 1).length;
  }
}

interface Row {
  n: number;
  rssPerNodeKb: number;
  rssMb: number;
  heartbeats: number;
  hbRate: number;
  gwCpuPerHbUs: number;
  pgCpuPerHbUs: number;
  hb: number[];
  hbFailed: number;
  dispatch: number[];
  whole: number[];
  runsFailed: number;
  nodesList: { bytes: number; ms: number };
  adminList: { bytes: number; ms: number };
  storm?: { bootMs: number; onlineMs: number | null; hbRefused: number; runs: number; runsRefused: number; twice: number; helloRetries: number };
  simRssMb: number;
}

/** The median of 5 GETs of `url` (NaN ms when one failed or took over 30 s: the gateway no longer answers). */
async function timedGet(url: string, headers: Record<string, string> = {}): Promise<{ bytes: number; ms: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    try {
      const res = await fetch(url, { headers: { 'accept-encoding': 'identity', ...headers }, signal: AbortSignal.timeout(30_000) });
      bytes = (await res.arrayBuffer()).byteLength;
      if (!res.ok) throw new Error(`${url} answered ${res.status}`);
    } catch (e) {
      console.error(`GET ${url}: ${e instanceof Error ? e.message : e}`);
      return { bytes, ms: NaN };
    }
    times.push(performance.now() - t0);
  }
  return { bytes, ms: percentile(times, 50) };
}

async function main(): Promise<void> {
  if (GATEWAY === 'control-plane/dist/main.js') {
    const built = spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale', 'control-plane'], { stdio: 'inherit' });
    if (built.status !== 0) throw new Error('the build failed');
  }
  const name = `svc_fleet_${Math.random().toString(36).slice(2, 10)}`;
  const adminDb = new pg.Client({ connectionString: ADMIN_PG });
  await adminDb.connect();
  await adminDb.query(`create database ${name}`);
  const dbUrl = new URL(ADMIN_PG);
  dbUrl.pathname = `/${name}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-fleet-'));
  const env = { DATABASE_URL: dbUrl.toString(), SVC_DATA_DIR: dataDir };
  const gws: Gateway[] = [];
  const workers: Worker[] = [];
  const rows: Row[] = [];
  const runs = new Runs();
  /** The Postgres backends serving the bench's database (other databases on the machine are not ours to count). */
  const ourBackends = async () => (await adminDb.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [name])).rows.map((r) => r.pid);
  /** Their CPU seconds so far, each; a backend gone by the end of a window is left out of it (the pool keeps its connections). */
  const backendsCpu = (pids: number[]) => pids.map((p) => processCpuSeconds(p));
  try {
    for (let r = 0; r < REPLICAS; r++) gws.push(await boot(env));
    await sleep(3000);
    const idleMb = rssMb(gws[0]!.child.pid!);
    const { client } = await new SvcClient({ baseUrl: gws[0]!.url }).signIn(privateKeyToAccount(generatePrivateKey()));
    const apiKey = (await client.createKey()).key;
    // Workers of each replica: nodes split evenly between the replicas.
    for (let r = 0; r < REPLICAS; r++) for (let w = 0; w < WORKERS; w++) workers.push(new Worker(gws[r]!.url, RAMP / (WORKERS * REPLICAS), runs.onJob));
    await Promise.all(workers.map((w) => w.ready()));
    let enrolled = 0;
    for (const n of ROWS) {
      const t0 = performance.now();
      const fresh = await enroll(gws[0]!.url, n - enrolled, enrolled);
      const enrollMs = performance.now() - t0;
      const per = Math.ceil(fresh.length / workers.length);
      await Promise.all(workers.map((w, i) => w.add(fresh.slice(i * per, (i + 1) * per))));
      enrolled = n;
      const onlineMs = await untilOnline(workers, n, 300_000);
      console.error(`N=${n}: enrolled ${fresh.length} in ${(enrollMs / 1000).toFixed(1)} s, all online after ${((onlineMs ?? NaN) / 1000).toFixed(1)} s`);
      // Let the first heartbeats (sent on connect) pass: the window holds only the spread cadence.
      await sleep(5000);
      for (const w of workers) w.reset();
      const pid = gws[0]!.child.pid!;
      const backends = await ourBackends();
      const cpu0 = { gw: gws.reduce((a, g) => a + processCpuSeconds(g.child.pid!), 0), pg: backendsCpu(backends), t: performance.now() };
      await sleep(WINDOW_S * 1000);
      const s = await allStats(workers);
      const cpu1 = { gw: gws.reduce((a, g) => a + processCpuSeconds(g.child.pid!), 0), pg: backendsCpu(backends), t: performance.now() };
      const heartbeats = s.hb.length + s.hbFailed;
      const rss = rssMb(pid);
      const ids = await runs.paced(gws.map((g) => g.url), apiKey, DISPATCH_S);
      const f = runs.figures(ids);
      if (f.failed) console.error(`N=${n}: runs failed by status (0: no answer): ${JSON.stringify(f.statuses)}`);
      console.log(`  slowest dispatches: ${runs.slowest(ids, 3).map((x) => `${ms(x.ms)} ms at +${(x.at / 1000).toFixed(2)} s through replica ${(x.index % REPLICAS) + 1}`).join(', ')}`);
      const nodesList = await timedGet(`${gws[0]!.url}/v1/nodes`);
      const adminList = await timedGet(`${gws[0]!.url}/v1/admin/nodes`, { authorization: `Bearer ${ADMIN_TOKEN}` });
      const row: Row = {
        n,
        rssMb: rss,
        rssPerNodeKb: ((rss - idleMb) * 1024 * REPLICAS) / n,
        heartbeats,
        hbRate: heartbeats / ((cpu1.t - cpu0.t) / 1000),
        gwCpuPerHbUs: ((cpu1.gw - cpu0.gw) * 1e6) / heartbeats,
        pgCpuPerHbUs: (cpu1.pg.reduce((a, c, i) => a + (c > 0 ? c - cpu0.pg[i]! : 0), 0) * 1e6) / heartbeats,
        hb: s.hb,
        hbFailed: s.hbFailed,
        dispatch: f.dispatch,
        whole: f.whole,
        runsFailed: f.failed,
        nodesList,
        adminList,
        simRssMb: s.rssMb,
      };
      if (STORM) {
        for (const w of workers) w.reset();
        // Runs go on through the storm; the gateway (the first replica) is killed and started again.
        const stormIds: string[] = [];
        let stormDone = false;
        // One second of paced runs at a time until every node is back (at most 240 s).
        const pacer = (async () => {
          const tEnd = performance.now() + 240_000;
          while (!stormDone && performance.now() < tEnd) stormIds.push(...(await runs.paced([gws[0]!.url], apiKey, 1)));
        })();
        await sleep(1000);
        await stop(gws[0]!.child, 'SIGKILL');
        const restarted = await boot(env, gws[0]!.port);
        gws[0] = restarted;
        const back = await untilOnline(workers, n, 180_000);
        await sleep(2000);
        stormDone = true;
        await pacer;
        const ss = await allStats(workers);
        const rf = runs.figures(stormIds);
        row.storm = { bootMs: restarted.ms, onlineMs: back === null ? null : back + restarted.ms, hbRefused: ss.hbFailed, runs: stormIds.length, runsRefused: rf.failed, twice: runs.twice(stormIds), helloRetries: ss.helloRetries };
      }
      rows.push(row);
      printRow(row, idleMb);
      // A row where the gateway no longer keeps up is where this machine stops: a larger fleet only fails more.
      const why = row.hbFailed > heartbeats / 10 ? `${row.hbFailed} of ${heartbeats} heartbeats failed` : f.failed > ids.length / 2 ? `${f.failed} of ${ids.length} runs failed` : row.storm && row.storm.onlineMs === null ? 'not every node was back within 180 s of the restart' : null;
      if (why) {
        console.log(`the fleet stops growing at N=${n}: ${why}`);
        break;
      }
    }
  } finally {
    stopping = true;
    for (const w of workers) w.child.kill('SIGKILL');
    for (const g of gws) await stop(g.child).catch(() => undefined);
    await adminDb.query(`drop database if exists ${name} with (force)`).catch(() => undefined);
    await adminDb.end();
    rmSync(dataDir, { recursive: true, force: true });
  }
  printTable(rows);
}

const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
const p = (xs: number[], q: number) => (xs.length ? percentile(xs, q) : NaN);

function printRow(r: Row, idleMb: number): void {
  console.error(
    `N=${r.n}: RSS ${r.rssMb.toFixed(0)} MB (idle ${idleMb.toFixed(0)}), ${r.rssPerNodeKb.toFixed(1)} KB/node; ${r.heartbeats} heartbeats at ${r.hbRate.toFixed(1)}/s: p50 ${ms(p(r.hb, 50))} p99 ${ms(p(r.hb, 99))} ms, ${r.hbFailed} failed; CPU/hb gateway ${r.gwCpuPerHbUs.toFixed(0)} µs pg ${r.pgCpuPerHbUs.toFixed(0)} µs; dispatch p50 ${ms(p(r.dispatch, 50))} p99 ${ms(p(r.dispatch, 99))} ms (call p50 ${ms(p(r.whole, 50))}), ${r.runsFailed} failed; GET /v1/nodes ${(r.nodesList.bytes / 1024).toFixed(0)} KB ${ms(r.nodesList.ms)} ms; admin ${(r.adminList.bytes / 1024).toFixed(0)} KB ${ms(r.adminList.ms)} ms; sim RSS ${r.simRssMb.toFixed(0)} MB` +
      (r.storm ? `; storm: boot ${ms(r.storm.bootMs)} ms, all online ${ms(r.storm.onlineMs ?? NaN)} ms after kill-restart, heartbeats refused ${r.storm.hbRefused}, runs ${r.storm.runs} refused ${r.storm.runsRefused}, twice ${r.storm.twice}, hellos asked again ${r.storm.helloRetries}` : ''),
  );
}

function printTable(rows: Row[]): void {
  console.log(`fleet bench: node ${process.version}, ${WORKERS} simulator process(es) per replica, ${REPLICAS} replica(s), window ${WINDOW_S} s, dispatch ${RATE}/s for ${DISPATCH_S} s, job delay ${JOB_DELAY_MS} ms; the machine is shared`);
  console.log('| N | RSS/node | CPU/heartbeat (gateway + pg) | heartbeat p50/p99 | dispatch p50/p99 (call p50) | GET /v1/nodes | admin list | storm: all online / refused hb / refused runs / run twice |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const st = r.storm ? `${ms((r.storm.onlineMs ?? NaN) / 1000)} s / ${r.storm.hbRefused} / ${r.storm.runsRefused} of ${r.storm.runs} / ${r.storm.twice}` : '-';
    console.log(
      `| ${r.n} | ${r.rssPerNodeKb.toFixed(1)} KB (${r.rssMb.toFixed(0)} MB) | ${r.gwCpuPerHbUs.toFixed(0)} + ${r.pgCpuPerHbUs.toFixed(0)} µs at ${r.hbRate.toFixed(0)}/s | ${ms(p(r.hb, 50))} / ${ms(p(r.hb, 99))} ms | ${ms(p(r.dispatch, 50))} / ${ms(p(r.dispatch, 99))} ms (${ms(p(r.whole, 50))})${r.runsFailed ? `, ${r.runsFailed} failed` : ''} | ${(r.nodesList.bytes / 1024).toFixed(0)} KB, ${ms(r.nodesList.ms)} ms | ${(r.adminList.bytes / 1024).toFixed(0)} KB, ${ms(r.adminList.ms)} ms | ${st} |`,
    );
  }
}

await main();
