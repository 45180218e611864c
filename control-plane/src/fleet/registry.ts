import { sql, type Kysely, type Selectable } from 'kysely';
import { HEARTBEAT_SECONDS, NODE_KINDS, PREFIX, ServiceError, newId, newSecret, notFound, sha256Hex, type Clock, type HeartbeatBody } from '@svc/shared';
import type { DB, NodesTable } from '../db/schema.ts';
import type { NodePrincipal } from '../http/auth-types.ts';
import { PublicListCache } from './public-list.ts';
import { RegistryView } from './registry-view.ts';
import { WriteBatch } from './write-batch.ts';
import { isOnline, type NodeSnapshot } from './scheduler.ts';
import { observeSpeed } from './speed.ts';

export interface EnrollInput {
  name?: string | undefined;
  kinds: Array<'sandbox' | 'inference'>;
  models?: string[] | undefined;
  model_map?: Record<string, string> | undefined;
  speed_factor?: number | undefined;
}

type NodeRow = Selectable<NodesTable>;
export const HOUSE_ACCOUNT = 'acct_house_ops';
/**
 * `latency_ms` is an exponential moving average of the dispatch round trip (job sent -> the agent's finish
 * report), over the jobs the node reported finished: the first sample seeds it, then
 * latency = latency + LATENCY_ALPHA × (sample − latency). Lost, canceled and control-plane-timed-out jobs
 * give no sample (no round trip completed), and neither does a job whose outputs a slow consumer held back
 * (nor a speed sample: a slow caller would otherwise lower, or raise, the node's figures).
 */
export const LATENCY_ALPHA = 0.2;

/**
 * How a dispatched job ended, for the node's record. `canceled` is a cancel by the caller: it counts as
 * dispatched but neither for nor against the node (the node did nothing wrong). `failed` covers a failure the
 * agent reported, its own time limit, a job lost with its node, and a job the control plane timed out.
 */
export type JobOutcome = 'succeeded' | 'failed' | 'canceled';

/** The published reliability: the share of judged jobs (succeeded + failed; caller cancels excluded) that ended well, null before any. */
export function publishedReliability(r: { succeeded: number; failed: number }): number | null {
  const judged = r.succeeded + r.failed;
  return judged === 0 ? null : Number((r.succeeded / judged).toFixed(4));
}

/** The columns of the public view (GET /v1/nodes). */
const PUBLIC_COLUMNS = ['id', 'name', 'kinds', 'models', 'speed_factor', 'clamp_count', 'approved', 'disabled', 'draining', 'last_heartbeat_at', 'succeeded', 'failed', 'dispatched', 'latency_ms'] as const;
type PublicRow = Pick<NodeRow, (typeof PUBLIC_COLUMNS)[number]>;

/** Enrolled nodes: enrollment, node-key auth, heartbeats, gates, approval, observed reliability and speed. */
export class NodeRegistry {
  /** The scheduler's view of the nodes (RegistryView): loaded by full reads, kept in step by this registry's writes. */
  readonly view: RegistryView;
  /** The public list (GET /v1/nodes), kept serialized at most PUBLIC_LIST_MAX_AGE_MS old (see PublicListCache). */
  readonly publicList: PublicListCache;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    /** This process (`Database.processId`). */
    self: string,
  ) {
    this.view = new RegistryView(db, clock, self);
    this.publicList = new PublicListCache(clock, async () => JSON.stringify(await this.publicRows()));
  }

  /**
   * Puts a node's committed row into the scheduler's view and passes it on; the kept public list follows it unless
   * `shown` is false (a write that changes nothing the public list shows beyond a heartbeat's time).
   */
  private indexed<R extends NodeRow>(row: R, shown = true): R {
    this.view.written([row]);
    if (shown) this.publicList.invalidate();
    return row;
  }

  async enroll(accountId: string, input: EnrollInput, house = false) {
    const now = this.clock.now();
    if (input.kinds.includes('inference') && !(input.models && input.models.length)) {
      throw new ServiceError('invalid_request', 'models: an inference node declares the models it serves', { param: 'models' });
    }
    for (const [pub] of Object.entries(input.model_map ?? {})) {
      if (!(input.models ?? []).includes(pub)) throw new ServiceError('invalid_request', `model_map: "${pub}" is not among models`, { param: 'model_map' });
    }
    if (house) {
      await this.db.insertInto('accounts').values({ id: HOUSE_ACCOUNT, created_at: now, suspended_at: null, suspended_reason: null }).onConflict((oc) => oc.column('id').doNothing()).execute();
    }
    const key = newSecret(PREFIX.nodeKey);
    const speed = input.speed_factor ?? 1;
    const row = await this.db
      .insertInto('nodes')
      .values({
        id: newId(PREFIX.node),
        account_id: house ? HOUSE_ACCOUNT : accountId,
        name: input.name ?? null,
        house,
        kinds: JSON.stringify([...new Set(input.kinds)].sort()),
        models: JSON.stringify(input.models ?? []),
        model_map: JSON.stringify(input.model_map ?? {}),
        declared_speed_factor: speed,
        speed_factor: speed,
        key_hash: sha256Hex(key),
        key_prefix: key.slice(0, 14),
        endpoint: null,
        capabilities: null,
        agent_version: null,
        last_heartbeat_at: null,
        latency_ms: null,
        observed_speed: null,
        created_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { node: this.ownerView(this.indexed(row)), node_key: key };
  }

  /**
   * Node-key auth (heartbeat and channel), mostly answered from memory (NodeKeys). The spec has no node-key revoke
   * route; a key is refused while its owner account is suspended (`POST /v1/admin/accounts/suspend`) and works
   * again when the suspension is lifted. `nodes.revoked_at` is unused: nothing in the spec sets it.
   */
  authenticate(secret: string): Promise<NodePrincipal> {
    return this.view.keys.authenticate(secret);
  }

  /**
   * Records a heartbeat: its capabilities, endpoint, load and agent version, and when it came. Answered once
   * committed; the heartbeats that come while one statement commits are written together in the next (WriteBatch),
   * so a large fleet costs the database one commit per round trip rather than one per heartbeat.
   */
  async heartbeat(nodeId: string, hb: HeartbeatBody) {
    const row = await this.heartbeats.add(nodeId, { hb, at: this.clock.now() });
    return { node_id: row.id, approved: row.approved, disabled: row.disabled, draining: row.draining, next_heartbeat_seconds: HEARTBEAT_SECONDS, received_at: row.last_heartbeat_at!.toISOString() };
  }

  /** One statement for a round of heartbeats (one per node: a node's latest in the round). */
  private async writeHeartbeats(items: Array<{ key: string; value: { hb: HeartbeatBody; at: Date } }>): Promise<Map<string, NodeRow>> {
    const col = <T>(f: (v: { hb: HeartbeatBody; at: Date }) => T) => items.map((i) => f(i.value));
    const rows = await sql<NodeRow>`
      update nodes n set
        capabilities = h.capabilities::jsonb, endpoint = h.endpoint, running_jobs = h.running_jobs,
        agent_version = h.agent_version, last_heartbeat_at = h.at
      from unnest(
        ${items.map((i) => i.key)}::text[], ${col((v) => JSON.stringify(v.hb.capabilities))}::text[], ${col((v) => v.hb.endpoint ?? null)}::text[],
        ${col((v) => v.hb.load.running_jobs)}::integer[], ${col((v) => v.hb.agent_version)}::text[], ${col((v) => v.at.toISOString())}::timestamptz[]
      ) as h(id, capabilities, endpoint, running_jobs, agent_version, at)
      where n.id = h.id
      returning n.*`.execute(this.db);
    const online = (id: string) => {
      const before = this.view.index.get(id);
      return !!before && before.approved && isOnline(before, this.clock.now());
    };
    // A heartbeat of a node online already moves only its time in the public list (kept at most a second old).
    return new Map(rows.rows.map((r) => [r.id, this.indexed(r, !online(r.id))]));
  }

  private readonly heartbeats = new WriteBatch<string, { hb: HeartbeatBody; at: Date }, NodeRow>(
    (items) => this.writeHeartbeats(items),
    () => notFound('Node'),
  );

  async get(nodeId: string): Promise<NodeRow> {
    const row = await this.db.selectFrom('nodes').selectAll().where('id', '=', nodeId).executeTakeFirst();
    if (!row) throw notFound('Node');
    return row;
  }

  /**
   * Sets a gate on a node: the owner's (`accountId`), or any node for an admin (`accountId` null). Another
   * account's node answers as an unknown one does (the same 404, from the same single statement).
   */
  async setGate(accountId: string | null, nodeId: string, gate: 'disabled' | 'draining', set: boolean) {
    let q = this.db.updateTable('nodes').set({ [gate]: set }).where('id', '=', nodeId);
    if (accountId !== null) q = q.where('account_id', '=', accountId);
    const updated = await q.returningAll().executeTakeFirst();
    if (!updated) throw notFound('Node');
    return this.ownerView(this.indexed(updated));
  }

  async approve(nodeId: string, approved: boolean) {
    await this.get(nodeId);
    const row = await this.db.updateTable('nodes').set({ approved }).where('id', '=', nodeId).returningAll().executeTakeFirstOrThrow();
    return this.ownerView(this.indexed(row));
  }

  /**
   * Records how a dispatched job ended: the counters (atomically), the latency moving average (a sample only
   * when the node reported the finish), and the speed clamp rule (succeeded jobs that report work units).
   */
  async recordOutcome(nodeId: string, o: { outcome: JobOutcome; latencyMs?: number | undefined; kind: string; workUnits?: number | undefined; durationMs: number }) {
    const ok = o.outcome === 'succeeded';
    const row = ok ? await this.get(nodeId) : null;
    const speed = row ? observeSpeed(row, o) : null;
    const x = o.latencyMs;
    await this.db
      .updateTable('nodes')
      .set((eb) => ({
        dispatched: eb('dispatched', '+', 1),
        succeeded: eb('succeeded', '+', ok ? 1 : 0),
        failed: eb('failed', '+', o.outcome === 'failed' ? 1 : 0),
        ...(x === undefined ? {} : { latency_ms: sql<number>`coalesce(latency_ms + ${LATENCY_ALPHA}::double precision * (${x}::double precision - latency_ms), ${x}::double precision)` }),
        ...(speed && row ? { observed_speed: speed.observed, speed_factor: speed.speedFactor, clamp_count: eb('clamp_count', '+', speed.clamped ? 1 : 0) } : {}),
      }))
      .where('id', '=', nodeId)
      .returningAll()
      .executeTakeFirst()
      .then((r) => void (r && this.indexed(r)));
  }

  /** What the owner sees (never the key). */
  ownerView(r: NodeRow) {
    const now = this.clock.now();
    return {
      ...this.publicView(r, now),
      approved: r.approved,
      disabled: r.disabled,
      draining: r.draining,
      house: r.house,
      key_prefix: r.key_prefix,
      model_map: r.model_map,
      declared_speed_factor: r.declared_speed_factor,
      endpoint: r.endpoint,
      capabilities: r.capabilities,
      agent_version: r.agent_version,
      running_jobs: r.running_jobs,
      created_at: r.created_at.toISOString(),
    };
  }

  publicView(r: PublicRow, now = this.clock.now()) {
    const online = isOnline({ lastHeartbeatAt: r.last_heartbeat_at }, now);
    return {
      id: r.id,
      type: 'node' as const,
      name: r.name,
      kinds: r.kinds,
      models: r.models,
      speed_factor: r.speed_factor,
      clamp_count: r.clamp_count,
      status: !r.approved
        ? ('pending_approval' as const)
        : !online
          ? ('offline' as const)
          : r.disabled
            ? ('disabled' as const)
            : r.draining
              ? ('draining' as const)
              : ('online' as const),
      reliability: publishedReliability(r),
      jobs_dispatched: r.dispatched,
      latency_ms: r.latency_ms === null ? null : Math.round(r.latency_ms),
      last_heartbeat_at: r.last_heartbeat_at?.toISOString() ?? null,
    };
  }

  /** Every node in the public view, oldest first; reads only the columns that view shows (not capabilities or keys). */
  async publicRows() {
    const now = this.clock.now();
    const rows = await this.db.selectFrom('nodes').select(PUBLIC_COLUMNS).orderBy('created_at').orderBy('id').execute();
    return rows.map((r) => this.publicView(r, now));
  }

  async listOwned(accountId: string) {
    const rows = await this.db.selectFrom('nodes').selectAll().where('account_id', '=', accountId).orderBy('created_at').orderBy('id').execute();
    return rows.map((r) => this.ownerView(r));
  }

  /** Every node in the owner's view (admins). */
  async listAll() {
    const rows = await this.db.selectFrom('nodes').selectAll().orderBy('created_at').orderBy('id').execute();
    return rows.map((r) => this.ownerView(r));
  }

  /**
   * The fleet at a glance (admins): nodes by status and online (approved, heartbeating) per kind, the jobs they reported
   * running at their last heartbeat, and the sandbox capacity of the nodes that take sandbox work now
   * (approved, online, neither disabled nor draining): their cores and memory.
   */
  async summary() {
    const now = this.clock.now();
    const rows = await this.db.selectFrom('nodes').selectAll().execute();
    const byStatus: Record<string, number> = { online: 0, offline: 0, draining: 0, disabled: 0, pending_approval: 0 };
    const onlineByKind: Record<string, number> = Object.fromEntries(NODE_KINDS.map((k) => [k, 0]));
    let runningJobs = 0;
    const sandbox = { nodes: 0, cpu_cores: 0, memory_total_bytes: 0, memory_available_bytes: 0 };
    for (const r of rows) {
      const v = this.publicView(r, now);
      byStatus[v.status] = (byStatus[v.status] ?? 0) + 1;
      // Online as the registry says it: approved and heartbeating (draining and disabled nodes included).
      if (!r.approved || !isOnline({ lastHeartbeatAt: r.last_heartbeat_at }, now)) continue;
      runningJobs += r.running_jobs;
      for (const k of r.kinds) onlineByKind[k] = (onlineByKind[k] ?? 0) + 1;
      if (v.status === 'online' && r.kinds.includes('sandbox')) {
        const c = r.capabilities as { cpu?: { cores?: number }; memory?: { total_bytes?: number; available_bytes?: number } } | null;
        sandbox.nodes += 1;
        sandbox.cpu_cores += c?.cpu?.cores ?? 0;
        sandbox.memory_total_bytes += c?.memory?.total_bytes ?? 0;
        sandbox.memory_available_bytes += c?.memory?.available_bytes ?? 0;
      }
    }
    return { nodes: rows.length, by_status: byStatus, online_by_kind: onlineByKind, running_jobs: runningJobs, sandbox_capacity: sandbox };
  }
}
