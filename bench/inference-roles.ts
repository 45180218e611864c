/**
 * The child processes of bench/inference.ts, each started as `inference-roles.ts --role NAME`: the zero-latency
 * upstream, the bare reverse proxy, and the gateway (with `--floor`, also its services behind a bare node:http
 * handler). Each prints one JSON line with what the parent needs, then serves until killed. The gateway
 * started with `--stall-trace` also answers `reset` and `report` lines on stdin (see role 'gateway').
 */
import http from 'node:http';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { arg } from './args.ts';

export const MODEL = 'bench-chat';
/** Passed on to the gateway role by `inference.ts --floor`. */
const FLOOR = process.argv.includes('--floor');
/**
 * `--proxy pipe` (the default) or `--proxy undici`: the bare reverse proxy's HTTP client (see role 'proxy').
 * The piped proxy is the one the inference targets' figures were measured with, by the reference gateway measured in the
 * same run: the targets have the proxy carry 12.1x the reference gateway's req/s at c=64 (17,000 / 1,400) and add
 * 0.19x its p50 at c=1 (143 / 758 µs); on 2026-11-24 the piped proxy did 12.3x and 0.17x, undici's 16.3x and
 * 0.16x. The script prints these calibration ratios in every run.
 */
export const PROXY = arg('proxy', 'pipe');
/**
 * `--proxy-work µs`: the piped proxy spends that much CPU before calling the upstream and again after its answer
 * (a probe of what main-thread time per request does to the tail on the machine; 0, none, by default).
 */
const PROXY_WORK_US = Number(arg('proxy-work', '0'));

function spin(us: number): void {
  if (us <= 0) return;
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
}

/** Child roles: each prints one JSON line with what the parent needs, then serves until killed. */
async function role(name: string): Promise<void> {
  const ready = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  if (name === 'upstream') {
    const answer = JSON.stringify({
      id: 'chatcmpl-bench',
      object: 'chat.completion',
      created: 1,
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: 'Hi!' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 },
    });
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
        res.end(answer);
      });
    });
    server.keepAliveTimeout = 60_000;
    server.listen(0, '127.0.0.1', () => ready({ port: (server.address() as { port: number }).port }));
    return;
  }
  if (name === 'proxy') {
    const target = Number(arg('upstream-port', '0'));
    let server: http.Server;
    if (PROXY === 'pipe') {
      // node:http's client, streamed both ways.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
      server = http.createServer((req, res) => {
        spin(PROXY_WORK_US);
        const out = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, headers: req.headers, agent }, (up) => {
          spin(PROXY_WORK_US);
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        out.on('error', () => res.writeHead(502).end());
        req.pipe(out);
      });
    } else {
      // undici, the client the gateway calls providers with, bodies read whole (as the gateway reads them):
      // at concurrency 64 it carries a third more than node:http's client on this machine, more than the
      // proxy of the inference targets' figures did (see PROXY).
      const { Pool } = await import('undici');
      const pool = new Pool(`http://127.0.0.1:${target}`, { connections: 256 });
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          pool
            .request({ path: req.url ?? '/', method: req.method as 'POST', headers: { 'content-type': req.headers['content-type'] ?? 'application/json' }, body: Buffer.concat(chunks) })
            .then(async (up) => {
              const body = Buffer.from(await up.body.arrayBuffer());
              res.writeHead(up.statusCode, { 'content-type': String(up.headers['content-type'] ?? 'application/json'), 'content-length': body.length });
              res.end(body);
            })
            .catch(() => res.writeHead(502).end());
        });
      });
    }
    server.keepAliveTimeout = 60_000;
    server.listen(0, '127.0.0.1', () => ready({ port: (server.address() as { port: number }).port }));
    return;
  }
  if (name === 'gateway') {
    const { loadConfig } = await import('../control-plane/src/config.ts');
    const { createGateway } = await import('../control-plane/src/gateway.ts');
    const { SvcClient } = await import('@svc/shared/client');
    const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts');
    const upstream = arg('upstream-url', '');
    const port = await freePort();
    const config = loadConfig({
      PORT: String(port),
      HOST: '127.0.0.1',
      SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
      SVC_DATA_DIR: mkdtempSync(join(tmpdir(), 'svc-bench-')),
      DATABASE_URL: arg('database-url', ''),
      SVC_LOG_LEVEL: 'silent',
      SVC_LOCAL_AGENT: 'off',
      SVC_BILLING_ENFORCED: 'true',
      SVC_TREASURY_ADDRESS: '0x1111111111111111111111111111111111111111',
      SVC_USDT_CONTRACT: '0x2222222222222222222222222222222222222222',
      SVC_BREAKER_LIMIT_MICRO_USD: '0',
      SVC_SETTLE_BEHIND: arg('settle-behind', 'true'),
      SVC_PROVIDERS: JSON.stringify([{ name: 'bench', base_url: upstream, models: [{ id: MODEL, input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 2_000_000 }] }]),
    });
    const gw = await createGateway(config, { logger: false });
    const url = await gw.listen();
    const { client, session } = await new SvcClient({ baseUrl: url }).signIn(privateKeyToAccount(generatePrivateKey()));
    await gw.services.metering.credit(session.account_id, 1_000_000_000_000, 'grant', 'bench');
    const key = (await client.createKey()).key;
    const floor = FLOOR ? await floorServer(gw, url) : undefined;
    ready({ url, key, floor });
    if (process.argv.includes('--stall-trace')) {
      // `inference.ts --stall-trace`: the main thread's stall trace (modules/platform/stall-trace.ts), reset
      // and reported on a line of stdin each (`reset`, `report`); a report is one JSON line on stdout.
      const { stallTrace } = await import('../control-plane/src/modules/platform/stall-trace.ts');
      stallTrace.start();
      let buf = '';
      process.stdin.on('data', (d) => {
        buf += d;
        for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
          const cmd = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (cmd === 'reset') {
            stallTrace.reset();
            ready({ reset: true });
          }
          if (cmd === 'report') ready(stallTrace.report());
        }
      });
    }
    // Closed before it exits (--cpu-prof writes its profile at exit): exiting with the signer's worker inside a
    // libsecp256k1 call aborts the process ("terminate called after throwing an instance of 'Napi::Error'").
    process.once('SIGTERM', () => void gw.close().finally(() => process.exit(0)));
    return;
  }
  throw new Error(`unknown role ${name}`);
}

/**
 * `--floor`: the non-streamed chat completion of the gateway's own services (the same calls the route makes:
 * key auth, body digest, schema validation, hold, upstream call, settle, signed receipt, pending row, receipt
 * headers) from a bare node:http handler, without the HTTP framework's stages. Not a product path: no error
 * envelope, no metrics, no denylist beyond the digest.
 */
async function floorServer(gw: Awaited<ReturnType<typeof import('../control-plane/src/gateway.ts')['createGateway']>>, publicUrl: string): Promise<string> {
  const { RECEIPT_HEADERS, sha256Hex, PREFIX, randomId } = await import('@svc/shared');
  const { ChatBody } = await import('../control-plane/src/modules/inference/schemas.ts');
  const resource = `${publicUrl}/v1/chat/completions`;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const raw = Buffer.concat(chunks);
        sha256Hex(raw);
        const body = ChatBody.parse(JSON.parse(raw.toString('utf8')));
        const cred = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
        const p = await gw.services.keys.authenticate(cred);
        const requestId = PREFIX.request + randomId(20);
        const r = await gw.services.inference.chat(p, body, { requestId, runId: null, route: 'POST /v1/chat/completions', resource, endpoint: 'chat.completions', signal: new AbortController().signal, settleBehind: true });
        res.writeHead(200, {
          'content-type': 'application/json; charset=utf-8',
          'x-request-id': requestId,
          [RECEIPT_HEADERS.id]: r.receipt.payload.id,
          [RECEIPT_HEADERS.payload]: Buffer.from(r.receipt.canonical).toString('base64url'),
          [RECEIPT_HEADERS.signature]: r.receipt.signature,
          [RECEIPT_HEADERS.signer]: r.receipt.payload.signer,
          [RECEIPT_HEADERS.cost]: String(r.receipt.payload.cost_micro_usd),
        });
        res.end(JSON.stringify(r.body));
      })().catch((e: unknown) => {
        console.error(e);
        res.writeHead(500).end();
      });
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
}

/** A TCP port free on loopback now. */
export function freePort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

const r = process.argv.indexOf('--role');
if (r > 0) await role(process.argv[r + 1]!);
