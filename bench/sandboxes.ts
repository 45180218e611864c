/**
 * Sandbox bench (issue 6): API call to result for `echo hi` as a one-shot run against a raw
 * `docker run --rm` of the same command, back to back (faster than the warm pool refills on 2 cores, so
 * most runs miss it) and paced at 2 runs per second (within the refill rate: the pool is warm, as it is
 * when sized to the load); session exec round trip against a raw `docker exec`; and how many concurrent
 * sessions this host holds at the configured memory per session. Loopback only, bounded counts.
 *   npx tsx bench/sandboxes.ts [--runs 40] [--image svc-sandbox:small] [--max-sessions 40]
 */
import { execFileSync } from 'node:child_process';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway } from '../test/support/gateway.ts';
import { enrollAgent, until } from '../test/support/agent.ts';
import { percentile } from './load.ts';
import { arg } from './args.ts';

const RUNS = Number(arg('runs', '40'));
const IMAGE = arg('image', 'svc-sandbox:small');
const MAX_SESSIONS = Number(arg('max-sessions', '40'));
const MEMORY_MB = 64;

/** `n` timed calls of `f`, one after the other; with `everyMs`, each starts `everyMs` after the one before. */
async function timed(n: number, f: () => Promise<unknown> | unknown, everyMs = 0): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f();
    out.push(performance.now() - t0);
    const rest = everyMs - (performance.now() - t0);
    if (rest > 0) await new Promise((r) => setTimeout(r, rest));
  }
  return out;
}
const line = (name: string, xs: number[]) => console.log(`${name.padEnd(42)} p50 ${percentile(xs, 50).toFixed(1).padStart(7)} ms   p99 ${percentile(xs, 99).toFixed(1).padStart(7)} ms`);

async function main() {
  const t = await startTestGateway({ env: { SVC_SANDBOX_MEMORY_MB: String(MEMORY_MB), SVC_SANDBOX_PIDS: '64' } });
  const owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 1e12, 'grant', 'bench');
  const key = await owner.client.createKey();
  const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } });
  const agent = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  agent.start({ SVC_SANDBOX_IMAGE: IMAGE, SVC_SANDBOX_POOL: '3' });
  try {
    await until('agent', async () => t.gw.fleet.hub.isConnected(agent.nodeId) && (await t.gw.fleet.registry.get(agent.nodeId)).last_heartbeat_at !== null, 60_000);
    await api.request('POST', '/v1/sandboxes', { body: { code: 'echo warm' } });
    console.log(`sandbox bench: image ${IMAGE}, ${RUNS} sequential runs each, ${MEMORY_MB} MiB per sandbox`);
    const raw = await timed(Math.min(RUNS, 20), () => execFileSync('docker', ['run', '--rm', '--network', 'none', IMAGE, 'sh', '-c', 'echo hi']));
    const api1 = await timed(RUNS, () => api.request('POST', '/v1/sandboxes', { body: { code: 'echo hi' } }));
    await new Promise((r) => setTimeout(r, 3000)); // the pool refills
    const paced = await timed(RUNS, async () => {
      await api.request('POST', '/v1/sandboxes', { body: { code: 'echo hi' } });
    }, 500);
    line('raw docker run --rm (baseline)', raw);
    line('POST /v1/sandboxes echo hi, back to back', api1);
    line('POST /v1/sandboxes echo hi, 2 per s', paced);
    console.log(`  one-shot p50 / raw docker run p50: back to back ${(percentile(api1, 50) / percentile(raw, 50)).toFixed(2)}, paced ${(percentile(paced, 50) / percentile(raw, 50)).toFixed(2)}`);

    const s = await api.request<{ id: string }>('POST', '/v1/sandboxes/sessions', { body: {} });
    const container = execFileSync('docker', ['ps', '-q', '--filter', `label=svc.sandbox.id=${s.id}`]).toString().trim().split('\n')[0] ?? '';
    const rawExec = container ? await timed(RUNS, () => execFileSync('docker', ['exec', container, 'sh', '-c', 'echo hi'])) : [];
    const apiExec = await timed(RUNS, () => api.request('POST', `/v1/sandboxes/sessions/${s.id}/exec`, { body: { code: 'echo hi' } }));
    if (rawExec.length) line('raw docker exec (baseline)', rawExec);
    else console.log('raw docker exec: could not find the session container by label svc.sandbox.id');
    line('POST .../sessions/:id/exec echo hi', apiExec);
    if (rawExec.length) console.log(`  session exec p50 / raw docker exec p50: ${(percentile(apiExec, 50) / percentile(rawExec, 50)).toFixed(2)}`);
    await api.request('DELETE', `/v1/sandboxes/sessions/${s.id}`);

    const ids: string[] = [];
    const t0 = performance.now();
    for (let i = 0; i < MAX_SESSIONS; i++) {
      const r = await api.raw('POST', '/v1/sandboxes/sessions', { body: {} });
      if (r.status !== 201) {
        console.log(`session ${i + 1} refused: HTTP ${r.status}`);
        break;
      }
      ids.push(((await r.json()) as { id: string }).id);
    }
    const alive = await Promise.all(ids.map((id) => api.request<{ stdout: string }>('POST', `/v1/sandboxes/sessions/${id}/exec`, { body: { code: 'echo ok' } }).then((x) => x.stdout === 'ok\n', () => false)));
    console.log(`concurrent sessions held: ${alive.filter(Boolean).length} of ${ids.length} attempted (cap ${MAX_SESSIONS}) at ${MEMORY_MB} MiB limit each, created in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const free = execFileSync('free', ['-m']).toString().split('\n')[1];
    console.log(`host memory with them running (free -m): ${free}`);
    for (const id of ids) await api.request('DELETE', `/v1/sandboxes/sessions/${id}`).catch(() => undefined);
  } finally {
    await agent.kill('SIGTERM');
    await t.close();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
