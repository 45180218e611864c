/** Load generators and the order statistics the bench scripts report. */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The p-th percentile (nearest rank, from below) of xs, in any order. */
export const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** The median of xs, in any order (the mean of the middle two for an even count). */
export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Latencies in milliseconds (p99.9 and the maximum too), and requests per second. */
export type LoadRow = { p50: number; p99: number; p999: number; max: number; rps: number };

/** wrk's duration units to milliseconds ("812.00us", "1.20ms", "2.01s"). */
const wrkMs = (v: string) => {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(v.trim());
  if (!m) throw new Error(`wrk printed an unexpected latency ${v}`);
  return Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000, m: 60_000 } as const)[m[2] as 'us' | 'ms' | 's' | 'm'];
};

/**
 * JSON POSTs of `body` (with `headers`) to `<url>/chat/completions` from wrk (C, epoll; Debian package `wrk`) in its own
 * process: one thread, `conc` keep-alive connections, for `secs` seconds after a 1 s warm-up. A Node client
 * spends more CPU per request than the proxy it measures, and on 2 cores that CPU is taken from the servers;
 * wrk is the method behind the inference targets' reference figures. `around` runs just before and after the measured run;
 * `wrkArgs` go to wrk as they are (e.g. `--timeout 10s`).
 */
export async function loadWrk(url: string, body: string, headers: Record<string, string>, conc: number, secs: number, around?: { before(): void; after(): void }, wrkArgs: string[] = []): Promise<LoadRow> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-wrk-'));
  const script = join(dir, 'post.lua');
  writeFileSync(
    script,
    [
      `wrk.method = "POST"`,
      `wrk.body = ${JSON.stringify(body)}`,
      ...Object.entries({ 'content-type': 'application/json', ...headers }).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
      // --latency prints up to the p99: the p99.9 and the maximum (microseconds) from the same histogram.
      `done = function(summary, latency, requests) io.write(string.format("p99.9 %d\\nmax %d\\n", latency:percentile(99.9), latency.max)) end`,
    ].join('\n'),
  );
  const target = `${url.replace(/\/$/, '')}/chat/completions`;
  const run = (d: number) =>
    new Promise<string>((resolve, reject) => {
      const c = spawn('wrk', ['-t1', `-c${conc}`, `-d${d}s`, '--latency', ...wrkArgs, '-s', script, target], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      c.stdout!.on('data', (x) => (out += x));
      c.once('error', reject);
      c.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited with ${code}`))));
    });
  try {
    await run(1); // warm-up: connections, JIT, caches
    around?.before();
    const out = await run(secs);
    around?.after();
    const bad = /Non-2xx or 3xx responses: (\d+)/.exec(out) ?? /Socket errors: (.*)/.exec(out);
    if (bad) throw new Error(`wrk saw failures: ${bad[0]}`);
    return {
      p50: wrkMs(/^\s+50%\s+(\S+)/m.exec(out)![1]!),
      p99: wrkMs(/^\s+99%\s+(\S+)/m.exec(out)![1]!),
      p999: Number(/^p99\.9 (\d+)$/m.exec(out)![1]) / 1000,
      max: Number(/^max (\d+)$/m.exec(out)![1]) / 1000,
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The same POSTs from Node's HTTP client in this process: `total` requests from `conc` concurrent callers over keep-alive connections. */
export async function loadNode(url: string, body: string, extra: Record<string, string>, conc: number, total: number): Promise<LoadRow> {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...extra };
  const one = () =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now();
      const req = http.request({ host: u.hostname, port: u.port, method: 'POST', path: `${u.pathname.replace(/\/$/, '')}/chat/completions`, headers, agent }, (res) => {
        res.resume();
        res.on('end', () => (res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`HTTP ${res.statusCode}`))));
      });
      req.on('error', reject);
      req.end(body);
    });
  for (let i = 0; i < Math.min(200, total); i++) await one(); // warm-up: connections, JIT, caches
  const lat: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next++ < total) lat.push(await one());
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  agent.destroy();
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), p999: percentile(lat, 99.9), max: Math.max(...lat), rps: total / secs };
}
