/**
 * MCP gateway overhead bench: `tools/call` of a real MCP SDK server (McpServer on the SDK's Node Streamable
 * HTTP transport, stateless, JSON answers, one tool `echo`), sent
 *   1. directly to that server,
 *   2. through the gateway, POST /v1/mcp/servers/:id (API-key auth, registration lookup and unsealing, the allow
 *      list, hold, the upstream call with the gateway's credential, settle of the `mcp_call` event with its
 *      signed receipt and action attestation, the receipt in the result's _meta), billing enforced,
 * at concurrency 1 and 16 over keep-alive connections, each row `--requests` calls, in `--rounds` rounds of
 * (direct, gateway) back to back; figures are medians over the rounds, and the gateway's are also given as
 * what it adds to the direct baseline of the same round. The upstream and the gateway run in their own
 * processes; the load comes from Node's HTTP client in this one. Everything is on loopback.
 *   npx tsx bench/mcp.ts [--requests 2000] [--rounds 5] [--conc 1,16] [--pg postgres://postgres@127.0.0.1:5432/postgres | --pg none] [--profile DIR]
 * `--pg none` runs the gateway on the embedded database (PGlite) instead of a Postgres server; `--profile DIR`
 * writes a V8 CPU profile of the gateway process into DIR.
 * Target: the gateway adds under 2 ms to the p50 at concurrency 1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createServer } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { arg } from './args.ts';
import { median, percentile } from './load.ts';

const TOTAL = Number(arg('requests', '2000'));
const ROUNDS = Number(arg('rounds', '5'));
const CONCS = arg('conc', '1,16').split(',').map(Number);
const PG = arg('pg', 'postgres://postgres@127.0.0.1:5432/postgres');
const TARGET_ADDED_P50_MS = 2;
const CREDENTIAL = 'bench-upstream-credential';
/** `--profile DIR`: a V8 CPU profile of the gateway process, written into DIR when it exits. */
const PROFILE = arg('profile', '');

/** Child roles: each prints one JSON line with what the parent needs, then serves until killed. */
async function role(name: string): Promise<void> {
  const ready = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  if (name === 'upstream') {
    const { z } = await import('zod');
    const { McpServer } = await import('@modelcontextprotocol/sdk/server/mcp.js');
    const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js');
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        void (async () => {
          if (req.headers.authorization !== undefined && req.headers.authorization !== `Bearer ${CREDENTIAL}`) return void res.writeHead(401).end();
          const mcp = new McpServer({ name: 'bench-upstream', version: '1.0.0' });
          mcp.registerTool('echo', { description: 'Echo', inputSchema: { text: z.string() } }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
          const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
          res.on('close', () => void mcp.close());
          await mcp.connect(transport);
          await transport.handleRequest(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8')));
        })().catch(() => res.writeHead(500).end());
      });
    });
    server.keepAliveTimeout = 60_000;
    server.listen(0, '127.0.0.1', () => ready({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp` }));
    return;
  }
  if (name === 'gateway') {
    const { loadConfig } = await import('../control-plane/src/config.ts');
    const { createGateway } = await import('../control-plane/src/gateway.ts');
    const { SvcClient } = await import('@svc/shared/client');
    const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts');
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-mcp-'));
    const config = loadConfig({
      PORT: String(port),
      HOST: '127.0.0.1',
      SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
      SVC_DATA_DIR: dataDir,
      DATABASE_URL: arg('database-url', ''),
      SVC_LOG_LEVEL: 'silent',
      SVC_LOCAL_AGENT: 'off',
      SVC_BILLING_ENFORCED: 'true',
      SVC_TREASURY_ADDRESS: '0x1111111111111111111111111111111111111111',
      SVC_USDT_CONTRACT: '0x2222222222222222222222222222222222222222',
      SVC_BREAKER_LIMIT_MICRO_USD: '0',
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true', // the upstream is on loopback
    });
    const gw = await createGateway(config, { logger: false });
    const url = await gw.listen();
    const { client, session } = await new SvcClient({ baseUrl: url }).signIn(privateKeyToAccount(generatePrivateKey()));
    await gw.services.metering.credit(session.account_id, 1_000_000_000_000, 'grant', 'bench');
    const key = (await client.createKey()).key;
    const server = await client.request<{ id: string }>('POST', '/v1/mcp-servers', { body: { name: 'bench', url: arg('upstream-url', ''), credential: CREDENTIAL, allowed_tools: ['echo'], price_micro_usd_per_call: 100 } });
    ready({ url: `${url}/v1/mcp/servers/${server.id}`, key });
    process.once('SIGTERM', () => void gw.close().finally(() => process.exit(0)));
    return;
  }
  throw new Error(`unknown role ${name}`);
}

function start(roleName: string, extra: string[] = []): Promise<{ child: ChildProcess; info: Record<string, string> }> {
  const profile = PROFILE && roleName === 'gateway' ? ['--cpu-prof', '--cpu-prof-dir', PROFILE] : [];
  const child = spawn(process.execPath, ['--max-semi-space-size=64', ...profile, '--import', 'tsx', fileURLToPath(import.meta.url), '--role', roleName, ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve({ child, info: JSON.parse(buf.slice(0, nl)) as Record<string, string> });
    });
    child.once('exit', (code) => reject(new Error(`${roleName} exited with ${code}`)));
  });
}

/** `total` tools/call POSTs from `conc` concurrent callers over keep-alive connections; each call's latency in ms. */
async function load(url: string, headers: Record<string, string>, conc: number, total: number): Promise<number[]> {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
  const times: number[] = [];
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve, reject) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/call', params: { name: 'echo', arguments: { text: `hello ${i}` } } });
      const t0 = performance.now();
      const req = http.request(
        { host: u.hostname, port: u.port, method: 'POST', path: u.pathname, agent, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', 'content-length': String(Buffer.byteLength(body)), ...headers } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            times.push(performance.now() - t0);
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== 200 || !text.includes(`"hello ${i}"`)) return reject(new Error(`call ${i}: HTTP ${res.statusCode} ${text.slice(0, 300)}`));
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < total) await one(next++);
  }));
  agent.destroy();
  return times;
}

const ms = (x: number) => x.toFixed(3);

async function main(): Promise<void> {
  let databaseUrl = '';
  let admin: pg.Client | null = null;
  let dbName = '';
  if (PG !== 'none') {
    admin = new pg.Client({ connectionString: PG });
    await admin.connect();
    dbName = `svc_bench_mcp_${Date.now().toString(36)}`;
    await admin.query(`create database ${dbName}`);
    const u = new URL(PG);
    u.pathname = `/${dbName}`;
    databaseUrl = u.toString();
  }
  const upstream = await start('upstream');
  const gateway = await start('gateway', ['--upstream-url', upstream.info.url!, '--database-url', databaseUrl]);
  const direct = { url: upstream.info.url!, headers: { authorization: `Bearer ${CREDENTIAL}` } };
  const through = { url: gateway.info.url!, headers: { authorization: `Bearer ${gateway.info.key}` } };
  try {
    console.log(`MCP gateway bench: tools/call of a real MCP SDK server (stateless, JSON), ${TOTAL} calls per row, ${ROUNDS} rounds, database ${PG === 'none' ? 'embedded (PGlite)' : 'Postgres'}`);
    await load(direct.url, direct.headers, 4, 500); // warm-up: JIT, connections, credit lease
    await load(through.url, through.headers, 4, 500);
    const rows: string[] = [];
    let addedP50AtOne = NaN;
    for (const conc of CONCS) {
      const per: Array<{ d50: number; d99: number; g50: number; g99: number }> = [];
      for (let r = 0; r < ROUNDS; r++) {
        const d = await load(direct.url, direct.headers, conc, TOTAL);
        const g = await load(through.url, through.headers, conc, TOTAL);
        per.push({ d50: percentile(d, 50), d99: percentile(d, 99), g50: percentile(g, 50), g99: percentile(g, 99) });
      }
      const m = (f: (x: (typeof per)[number]) => number) => median(per.map(f));
      const d50 = m((x) => x.d50);
      const d99 = m((x) => x.d99);
      const g50 = m((x) => x.g50);
      const g99 = m((x) => x.g99);
      const add50 = m((x) => x.g50 - x.d50);
      const add99 = m((x) => x.g99 - x.d99);
      if (conc === 1) addedP50AtOne = add50;
      rows.push(`| ${conc} | ${ms(d50)} | ${ms(d99)} | ${ms(g50)} | ${ms(g99)} | +${ms(add50)} | +${ms(add99)} | ${(g50 / d50).toFixed(2)}x | ${(g99 / d99).toFixed(2)}x |`);
    }
    console.log('\n| concurrency | direct p50 ms | direct p99 ms | gateway p50 ms | gateway p99 ms | added p50 ms | added p99 ms | p50 ratio | p99 ratio |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(r);
    if (CONCS.includes(1)) console.log(`\ntarget: added p50 at concurrency 1 under ${TARGET_ADDED_P50_MS} ms: ${addedP50AtOne < TARGET_ADDED_P50_MS ? 'met' : 'NOT met'} (${ms(addedP50AtOne)} ms)`);
  } finally {
    gateway.child.kill('SIGTERM');
    upstream.child.kill('SIGTERM');
    await new Promise((r) => gateway.child.once('exit', r));
    if (admin) {
      await admin.query(`drop database if exists ${dbName} with (force)`).catch(() => undefined);
      await admin.end();
    }
  }
}

const r = process.argv.indexOf('--role');
if (r > 0) await role(process.argv[r + 1]!);
else await main();
