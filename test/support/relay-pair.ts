import { afterAll, beforeAll } from 'vitest';
import { ENFORCED_BILLING, startGatewayPair, startTestGateway, type TestGateway } from './gateway.ts';
import { enrollAgent, until, type TestAgent } from './agent.ts';
import { startUpstream, type TestUpstream } from './upstream.ts';

/** The reconnect grace of the relay tests' gateways. */
export const GRACE_MS = 1500;
/** The model the relay tests' inference nodes serve. */
export const RELAY_MODEL = 'relay-llama';

type Where = { url: string; processId: string };

/**
 * Two control-plane processes on one Postgres database (A, where jobs are dispatched, and B, which holds
 * agents' channels), an owner signed in on A, and a local upstream for inference nodes; started before the
 * file's tests and stopped after them (the agents they started too). Fields are set once `beforeAll` ran.
 */
export class RelayPair {
  a!: TestGateway & { databaseUrl: string | undefined; dataDir: string };
  b!: TestGateway;
  owner!: Awaited<ReturnType<TestGateway['signIn']>>;
  up!: TestUpstream;
  readonly agents: TestAgent[] = [];

  constructor() {
    let closePair: (() => Promise<void>) | undefined;
    beforeAll(async () => {
      this.up = await startUpstream();
      const env = { ...ENFORCED_BILLING, SVC_NODE_MODEL_PRICES: JSON.stringify({ [RELAY_MODEL]: { input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 3_000_000 } }) };
      const pair = await startGatewayPair({ reconnectGraceMs: GRACE_MS, env });
      ({ a: this.a, b: this.b, close: closePair } = pair);
      this.owner = await this.a.signIn();
    });
    afterAll(async () => {
      for (const x of this.agents) await x.kill();
      await closePair?.();
      await this.up?.close();
    });
  }

  /** B, as an agent's place to connect. */
  B(): Where {
    return { url: this.b.url, processId: this.b.gw.database.processId };
  }

  /** A gateway process on A's database besides A and B (each test stops its own). */
  third(): Promise<TestGateway> {
    return startTestGateway({ reconnectGraceMs: GRACE_MS, share: { databaseUrl: this.a.databaseUrl, dataDir: this.a.dataDir }, clock: this.a.clock });
  }

  channelOf(nodeId: string) {
    return this.a.gw.database.db.selectFrom('nodes').select(['channel_process', 'last_heartbeat_at']).where('id', '=', nodeId).executeTakeFirstOrThrow();
  }

  counts(nodeId: string) {
    return this.a.gw.database.db.selectFrom('nodes').select(['succeeded', 'failed']).where('id', '=', nodeId).executeTakeFirstOrThrow();
  }

  jobRow(id: string) {
    return this.a.gw.database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  }

  /** An agent enrolled on A, connected to `holder` (B by default), once `holder` is recorded as holding its channel. */
  async agentOn(holder: Where = this.B(), body: Parameters<typeof enrollAgent>[2] = { kinds: ['sandbox'] }, env: Record<string, string> = {}): Promise<TestAgent> {
    return (await this.connect(holder.url, body, env, (p) => p === holder.processId)).agent;
  }

  /** An agent enrolled on A, connected at `url` to a process other than A and B (a child gateway), and that process. */
  agentOnOther(url: string): Promise<{ agent: TestAgent; holder: string }> {
    return this.connect(url, { kinds: ['sandbox'] }, {}, (p) => p !== this.a.gw.database.processId && p !== this.b.gw.database.processId);
  }

  private async connect(url: string, body: Parameters<typeof enrollAgent>[2], env: Record<string, string>, holds: (processId: string) => boolean) {
    const agent = await enrollAgent(this.a, this.owner.client, body, { url });
    this.agents.push(agent);
    agent.start({ SVC_DOCKER_SOCKET: '/nonexistent/docker.sock', ...env });
    const holder = await until(`${agent.nodeId}'s channel held`, async () => {
      const r = await this.channelOf(agent.nodeId);
      return r.last_heartbeat_at !== null && r.channel_process !== null && holds(r.channel_process) ? r.channel_process : undefined;
    });
    return { agent, holder };
  }

  /** A diag.wait job dispatched on A to the node, once its first output arrived; `seen` collects its output. */
  async waitingJob(nodeId: string, payload: { ms: number; say: string; then?: string }, opts: { timeoutMs?: number; signal?: AbortSignal; seen?: string[] } = {}) {
    const seen = opts.seen ?? [];
    let started!: () => void;
    const output = new Promise<void>((r) => (started = r));
    const job = this.a.gw.fleet.hub.dispatch({ kind: 'diag.wait', payload, timeoutMs: opts.timeoutMs ?? 20_000, nodeId, signal: opts.signal, onOutput: (o) => (seen.push(o.data), started()) });
    await output;
    return { job, seen };
  }
}
