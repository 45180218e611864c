/**
 * Hosted-agent bench: an inbound hook call to its run, against a direct sandbox run of the same program, both
 * in this run, on one warm sandbox node (the small image, a warm pool). For each hook call: its 202, the run
 * started (claimed and sent to the node: its row leaves `queued`) and the run done (`succeeded`), polled in
 * process every 5 ms; the direct run is `POST /v1/sandboxes` to its result. Calls go one after another,
 * interleaved with the direct runs, so both meet the same pool. Loopback only, bounded counts.
 *   npx tsx bench/agents.ts [--runs 30] [--image svc-sandbox:small] [--pool 3]
 */
import { SvcClient } from '@svc/shared/client';
import { startTestGateway } from '../test/support/gateway.ts';
import { enrollAgent, until } from '../test/support/agent.ts';
import { percentile } from './load.ts';
import { arg } from './args.ts';

const RUNS = Number(arg('runs', '30'));
const IMAGE = arg('image', 'svc-sandbox:small');
const POOL = arg('pool', '3');
const CODE = 'echo hi';
/** How often the run's row is read (each read is a query on the same database the run writes to). */
const POLL_MS = 5;

const ms = (x: number) => x.toFixed(1).padStart(7);
const line = (name: string, xs: number[]) => console.log(`${name.padEnd(40)} p50 ${ms(percentile(xs, 50))} ms   p95 ${ms(percentile(xs, 95))} ms`);
const pause = (n: number) => new Promise((r) => setTimeout(r, n));

async function main() {
  const t = await startTestGateway({ env: { SVC_SANDBOX_MEMORY_MB: '64', SVC_SANDBOX_PIDS: '64' } });
  const owner = await t.signIn();
  await t.gw.services.metering.credit(owner.accountId, 1e12, 'grant', 'bench');
  const api = new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: (await owner.client.createKey({ scopes: ['sandboxes'] })).key } });
  const node = await enrollAgent(t, owner.client, { kinds: ['sandbox'] });
  node.start({ SVC_SANDBOX_IMAGE: IMAGE, SVC_SANDBOX_POOL: POOL });
  try {
    await until('sandbox node connected', async () => t.gw.fleet.hub.isConnected(node.nodeId) && (await t.gw.fleet.registry.get(node.nodeId)).last_heartbeat_at !== null, 60_000);
    const agent = await owner.client.request<{ id: string }>('POST', '/v1/agents', {
      body: { name: 'bench', language: 'sh', code: CODE, max_runs_per_hour: 3600, spend_cap_micro_usd: 1e12 },
    });
    const { url } = await owner.client.request<{ url: string }>('POST', `/v1/agents/${agent.id}/hooks/rotate`);
    const db = t.gw.database.db;
    const statusOf = async (id: string) => (await db.selectFrom('agent_runs').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status;
    const direct = () => api.request('POST', '/v1/sandboxes', { body: { language: 'sh', code: CODE } });

    // Warm up: both paths once, and the pool given time to fill.
    await direct();
    await fetch(url, { method: 'POST', body: 'warm' }).then((r) => r.json());
    await pause(3000);

    const accepted: number[] = [];
    const started: number[] = [];
    const done: number[] = [];
    const baseline: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      await direct();
      baseline.push(performance.now() - t0);
      await pause(300); // the pool refills between calls, for both paths alike

      const h0 = performance.now();
      const res = await fetch(url, { method: 'POST', body: `{"i":${i}}` });
      const { run_id } = (await res.json()) as { run_id: string };
      accepted.push(performance.now() - h0);
      let s = await statusOf(run_id);
      while (s === 'queued') {
        await pause(POLL_MS);
        s = await statusOf(run_id);
      }
      started.push(performance.now() - h0);
      while (s === 'running') {
        await pause(POLL_MS);
        s = await statusOf(run_id);
      }
      done.push(performance.now() - h0);
      if (s !== 'succeeded') throw new Error(`hook run ${run_id} ended ${s}`);
      await pause(300);
    }

    console.log(`hosted agents: ${RUNS} hook calls and ${RUNS} direct sandbox runs of \`${CODE}\`, interleaved, warm pool ${POOL}, image ${IMAGE}`);
    line('hook call answered (202)', accepted);
    line('hook call to run started (claimed, sent)', started);
    line('hook call to run done', done);
    line('direct POST /v1/sandboxes to result', baseline);
    const p50 = (xs: number[]) => percentile(xs, 50);
    console.log(`ratio hook-to-done / direct run (p50): ${(p50(done) / p50(baseline)).toFixed(2)}x`);
    console.log(`ratio hook-to-started / direct run (p50): ${(p50(started) / p50(baseline)).toFixed(2)}x`);
  } finally {
    await node.kill('SIGTERM');
    await t.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
