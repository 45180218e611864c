/**
 * Simulated fleet nodes for bench/fleet.ts (a load generator, forked by it; never part of the product). Each node
 * speaks the real agent protocol through the agent's own channel (node-agent/src/channel.ts: WebSocket + tRPC with
 * the protocol version from shared/, its reconnect backoff, a hello on every (re)connect naming the jobs it still
 * runs, asked again until answered), and the heartbeat
 * route on the real 60-second cadence. Node i's heartbeats fall at phase frac(i × 0.618…) of the minute, so any
 * first N nodes are spread evenly over it. A `sandbox.run` job is answered after a fixed delay with one line of
 * stdout and a plain result. The parent sends `add` with enrolled nodes, asks for `stats`, and is told of each
 * job's arrival (`job`) so it can time dispatch and see a run that reached a node twice.
 */
import { HEARTBEAT_SECONDS, PROTOCOL_VERSION, type HeartbeatBody } from '@svc/shared';
import { Channel } from '../node-agent/src/channel.ts';
import { ConnectionNumbers } from '../node-agent/src/connection-numbers.ts';

const url = process.env.FLEET_URL!;
const JOB_DELAY_MS = Number(process.env.FLEET_JOB_DELAY_MS ?? '20');
const HEARTBEAT_MS = HEARTBEAT_SECONDS * 1000;
const GOLDEN = (Math.sqrt(5) - 1) / 2;
const AGENT_VERSION = 'bench-sim/1';

const BODY: HeartbeatBody = {
  capabilities: {
    cpu: { cores: 4, model: 'simulated', load: 0.1 },
    memory: { total_bytes: 8 * 2 ** 30, available_bytes: 6 * 2 ** 30 },
    disk: { total_bytes: 100 * 2 ** 30, available_bytes: 80 * 2 ** 30 },
    gpus: [],
    docker: { reachable: true, version: '27.0.0' },
    os: 'linux',
  },
  load: { running_jobs: 0 },
  agent_version: AGENT_VERSION,
  protocol_version: PROTOCOL_VERSION,
};

interface Sim {
  id: string;
  key: string;
  /** Its hello was answered on the current connection, which has not closed since. */
  online: boolean;
  running: Set<string>;
  channel: Channel;
}

const sims: Sim[] = [];
const stats = { hb: [] as number[], hbFailed: 0, hbSent: 0, readies: 0, closes: 0, helloRetries: 0 };

function send(m: unknown): void {
  process.send?.(m);
}

async function heartbeat(s: Sim): Promise<void> {
  const t0 = performance.now();
  stats.hbSent++;
  try {
    const res = await fetch(`${url}/v1/nodes/heartbeat`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...BODY, load: { running_jobs: s.running.size } }),
      signal: AbortSignal.timeout(15_000),
    });
    await res.arrayBuffer();
    if (res.status !== 200) stats.hbFailed++;
    else stats.hb.push(performance.now() - t0);
  } catch {
    stats.hbFailed++;
  }
}

/** Heartbeats now, then at the node's phase of every minute (wall clock, so all workers share the schedule). */
function startHeartbeats(s: Sim, index: number): void {
  void heartbeat(s);
  const phase = ((index * GOLDEN) % 1) * HEARTBEAT_MS;
  const wait = (phase - (Date.now() % HEARTBEAT_MS) + HEARTBEAT_MS) % HEARTBEAT_MS;
  setTimeout(() => {
    void heartbeat(s);
    setInterval(() => void heartbeat(s), HEARTBEAT_MS);
  }, wait);
}

async function runJob(s: Sim, job: { job_id: string; kind: string; payload: unknown }): Promise<void> {
  s.running.add(job.job_id);
  const run = (job.payload as { env?: Record<string, string> } | null)?.env?.BENCH_RUN;
  send({ t: 'job', run: run ?? null, node: s.id, at: performance.timeOrigin + performance.now() });
  await new Promise((r) => setTimeout(r, JOB_DELAY_MS));
  if (!s.running.has(job.job_id)) return; // cancelled meanwhile
  try {
    if (job.kind !== 'sandbox.run') {
      await s.channel.finish({ job_id: job.job_id, ok: false, error: `the simulated node runs only sandbox.run, not ${job.kind}`, duration_ms: JOB_DELAY_MS });
      return;
    }
    await s.channel.outputs([{ job_id: job.job_id, seq: 0, stream: 'stdout', data: 'hi\n' }]);
    const result = { exit_code: 0, timed_out: false, oom_killed: false, duration_ms: JOB_DELAY_MS, stdout_bytes: 3, stderr_bytes: 0, stdout_truncated: false, stderr_truncated: false, image_digest: 'sha256:simulated' };
    await s.channel.finish({ job_id: job.job_id, ok: true, result, duration_ms: JOB_DELAY_MS });
  } catch {
    // The channel dropped mid-job: the hello on the next connection names it (until the control plane cancels it).
    return;
  }
  s.running.delete(job.job_id);
}

function startNode(id: string, key: string, index: number): void {
  const numbers = new ConnectionNumbers(null);
  const s: Sim = { id, key, online: false, running: new Set(), channel: undefined as unknown as Channel };
  s.channel = new Channel(url, key, AGENT_VERSION, {
    onMessage: (m) => {
      if (m.type === 'job') void runJob(s, m);
      else if (m.type === 'cancel') s.running.delete(m.job_id);
    },
    runningJobs: () => [...s.running],
    heldSessions: () => [],
    connection: () => numbers.next(),
    onFatal: (m) => console.error(`node ${id}: ${m}`),
    onReady: () => {
      stats.readies++;
      s.online = true;
    },
    onClosed: () => {
      stats.closes++;
      s.online = false;
    },
    log: (m) => {
      if (m.startsWith('hello not answered')) stats.helloRetries++;
    },
  });
  sims.push(s);
  s.channel.start();
  startHeartbeats(s, index);
}

process.on('message', (m: { t: string; nodes?: Array<{ id: string; key: string; index: number }> }) => {
  if (m.t === 'add') {
    // Paced at FLEET_RAMP nodes per second from this process, 10 at a time: a fleet coming up does not all dial in one tick.
    const nodes = m.nodes!;
    const every = (10 * 1000) / Number(process.env.FLEET_RAMP ?? '100');
    let i = 0;
    const step = () => {
      for (const n of nodes.slice(i, i + 10)) startNode(n.id, n.key, n.index);
      i += 10;
      if (i < nodes.length) setTimeout(step, every);
      else send({ t: 'added', count: sims.length });
    };
    step();
  } else if (m.t === 'stats') {
    send({ t: 'stats', online: sims.filter((s) => s.online).length, nodes: sims.length, hb: stats.hb, hbFailed: stats.hbFailed, hbSent: stats.hbSent, readies: stats.readies, closes: stats.closes, helloRetries: stats.helloRetries, rssMb: process.memoryUsage().rss / 2 ** 20 });
  } else if (m.t === 'reset') {
    stats.hb = [];
    stats.hbFailed = 0;
    stats.hbSent = 0;
    stats.helloRetries = 0;
  } else if (m.t === 'exit') {
    process.exit(0);
  }
});
send({ t: 'ready' });
