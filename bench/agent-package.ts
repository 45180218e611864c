/**
 * The packaged node agent against the agent run from a checkout, in the same run:
 *
 *   npx tsx bench/agent-package.ts [--runs 3] [--idle 10]
 *
 * Each run enrolls two nodes on one test gateway and starts, one after the other:
 *   - checkout: `node node-agent/bin/svc-node.js run` (this checkout's build, the Node.js on PATH: what
 *     installers/node-agent/install.sh installs);
 *   - package:  `svc-node/bin/svc-node run` from dist/svc-node-<version>-linux-x64.tar.gz extracted into a
 *     temporary directory (its own Node.js and bundle; built first when absent).
 * Both with the Docker engine reachable and no warm pool (SVC_SANDBOX_POOL=0). Figures: spawn to online (the
 * gateway sees the channel and a heartbeat), and the resident memory (VmRSS) `--idle` seconds after that.
 * Ratios are package / checkout of the same run (the machine's speed drifts). Also prints the artifacts' sizes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SvcClient } from '@svc/shared/client';
import { ADMIN_TOKEN, startTestGateway } from '../test/support/gateway.ts';
import { until, untilOnline } from '../test/support/agent.ts';
import { agentPackages } from '../test/support/agent-package.ts';
import { arg } from './args.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RUNS = Number(arg('runs', '3'));
const IDLE_S = Number(arg('idle', '10'));

const rssKb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale', 'node-agent'], { cwd: ROOT, stdio: 'inherit' });
  const { tarball, deb } = agentPackages();
  const dir = mkdtempSync(join(tmpdir(), 'svc-bench-pkg-'));
  spawnSync('tar', ['-xzf', tarball, '-C', dir]);
  const t = await startTestGateway();
  const owner = (await t.signIn()).client;
  const admin = new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: ADMIN_TOKEN } });
  const kinds = { checkout: [process.execPath, '--enable-source-maps', join(ROOT, 'node-agent', 'bin', 'svc-node.js')], package: [join(dir, 'svc-node', 'bin', 'svc-node')] };
  const rows: Record<string, { online: number[]; rss: number[] }> = { checkout: { online: [], rss: [] }, package: { online: [], rss: [] } };
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const [name, cmd] of Object.entries(kinds)) {
        const enrolled = await owner.request<{ node: { id: string }; node_key: string }>('POST', '/v1/nodes/enroll', { body: { kinds: ['sandbox'] } });
        await admin.request('POST', '/v1/admin/nodes/approve', { body: { node_id: enrolled.node.id, approved: true } });
        const cfg = join(dir, `cfg-${name}-${run}`);
        const env = { PATH: process.env.PATH, SVC_SANDBOX_POOL: '0', SVC_SANDBOX_IMAGE: 'svc-sandbox:small' };
        const e = spawnSync(cmd[0]!, [...cmd.slice(1), 'enroll', '--config-dir', cfg, '--url', t.url, '--data-dir', join(cfg, 'data')], { env: { ...env, SVC_NODE_KEY: enrolled.node_key } });
        if (e.status !== 0) throw new Error(`${name} enroll: ${e.stderr}`);
        const started = performance.now();
        const child: ChildProcess = spawn(cmd[0]!, [...cmd.slice(1), 'run', '--config-dir', cfg], { env, stdio: 'ignore' });
        try {
          await untilOnline(t, enrolled.node.id);
          rows[name]!.online.push(performance.now() - started);
          await new Promise((r) => setTimeout(r, IDLE_S * 1000));
          // The package's launcher is a shell that execs the runtime: the same pid.
          rows[name]!.rss.push(rssKb(child.pid!) / 1024);
        } finally {
          child.kill('SIGTERM');
          await until('agent exit', async () => child.exitCode !== null || child.signalCode !== null, 30_000);
        }
      }
    }
  } finally {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const c = rows.checkout!, p = rows.package!;
  const fmt = (xs: number[], unit: string) => `${median(xs).toFixed(unit === 'MB' ? 1 : 0)} ${unit} (${xs.map((x) => x.toFixed(0)).join(', ')})`;
  console.log(`agent-package bench: ${RUNS} runs, idle ${IDLE_S} s, medians (each run)`);
  console.log('| figure | checkout | package | package / checkout |');
  console.log('|---|---|---|---|');
  console.log(`| spawn to online | ${fmt(c.online, 'ms')} | ${fmt(p.online, 'ms')} | ${(median(p.online) / median(c.online)).toFixed(2)}x |`);
  console.log(`| idle RSS | ${fmt(c.rss, 'MB')} | ${fmt(p.rss, 'MB')} | ${(median(p.rss) / median(c.rss)).toFixed(2)}x |`);
  console.log(`| artifacts | | tarball ${(statSync(tarball).size / 1e6).toFixed(1)} MB, .deb ${(statSync(deb).size / 1e6).toFixed(1)} MB | |`);
  console.log(`checkout on Node.js ${process.versions.node}; package on its own runtime`);
}

await main();
process.exit(0);
