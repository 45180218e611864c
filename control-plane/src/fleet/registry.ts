import { sql, type Kysely, type Selectable } from 'kysely';
import { HEARTBEAT_SECONDS, NODE_KINDS, PREFIX, ServiceError, newId, newSecret, notFound, sha256Hex, type Clock, type HeartbeatBody } from '@svc/shared';
import type { DB, NodesTable } from '../db/schema.ts';
import type { NodePrincipal } from '../http/auth-types.ts';
import { NodeIndex } from './node-index.ts';
import { NodeKeys } from './node-keys.ts';
import { PublicListCache } from './public-list.ts';
import { SharedRead } from './shared-read.ts';
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

/** What the scheduler sees of a node: its snapshot, the model names it maps, and which process holds its channel. */
export type SchedulerNode = NodeSnapshot & { modelMap: Record<string, string>; channel: string | null; channelEpoch: number | null };

/** The columns the scheduler reads (a full read of the registry adds only key hashes and owners, for NodeKeys: no capabilities or names). */
const SCHEDULER_COLUMNS = ['id', 'kinds', 'models', 'model_map', 'speed_factor', 'approved', 'disabled', 'draining', 'last_heartbeat_at', 'running_jobs', 'succeeded', 'failed', 'latency_ms', 'channel_process', 'channel_epoch'] as const;
type SchedulerRow = Pick<NodeRow, (typeof SCHEDULER_COLUMNS)[number]>;
/** Rows per page of a full read of the scheduler's view. */
export const FULL_READ_PAGE = 1000;
/** How often the scheduler's view is read whole; between, its refreshes read only the rows changed since the last read. */
export const FULL_READ_MS = 300_000;
/** How far before the last read a refresh reads changed rows from: a write committed that much after its row was stamped is still seen. */
export const CHANGES_OVERLAP_MS = 5_000;
/** The columns of the public view (GET /v1/nodes). */
const PUBLIC_COLUMNS = ['id', 'name', 'kinds', 'models', 'speed_factor', 'clamp_count', 'approved', 'disabled', 'draining', 'last_heartbeat_at', 'succeeded', 'failed', 'dispatched', 'latency_ms'] as const;
type PublicRow = Pick<NodeRow, (typeof PUBLIC_COLUMNS)[number]>;

function schedulerNode(r: SchedulerRow): SchedulerNode {
  return {
    id: r.id,
    kinds: r.kinds,
    models: r.models,
    modelMap: r.model_map,
    speedFactor: r.speed_factor,
    approved: r.approved,
    disabled: r.disabled,
    draining: r.draining,
    lastHeartbeatAt: r.last_heartbeat_at,
    runningJobs: r.running_jobs,
    succeeded: r.succeeded,
    failed: r.failed,
    latencyMs: r.latency_ms,
    channel: r.channel_process,
    channelEpoch: r.channel_epoch === null ? null : Number(r.channel_epoch),
  };
}

/** Enrolled nodes: enrollment, node-key auth, heartbeats, gates, approval, observed reliability and speed. */
export class NodeRegistry {
  /** The scheduler's view of the nodes (see NodeIndex): loaded by full reads, kept in step by this registry's writes. */
  readonly index: NodeIndex<SchedulerNode>;
  /** The public list (GET /v1/nodes), kept serialized at most PUBLIC_LIST_MAX_AGE_MS old (see PublicListCache). */
  readonly publicList: PublicListCache;
  /** The node keys this process trusts without a read (kept whole by full reads, dropped for an account that changed). */
  readonly keys: NodeKeys;
  private refreshing: Promise<unknown> | null = null;
  private readonly wholeReads = new SharedRead(() => this.readWhole());
  /** The database's clock when the last read of the view began (the next reads rows changed since, less an overlap). */
  private readSince: Date | null = null;
  /** This process's clock at the last full read. */
  private fullReadAt: number | null = null;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
  ) {
    this.index = new NodeIndex(clock);
    this.keys = new NodeKeys(db, clock);
    this.publicList = new PublicListCache(clock, async () => JSON.stringify(await this.publicRows()));
  }

  /**
   * Puts a node's committed row into the scheduler's view and passes it on; the kept public list follows it unless
   * `shown` is false (a write that changes nothing the public list shows beyond a heartbeat's time).
   */
  private indexed<R extends NodeRow>(row: R, shown = true): R {
    this.index.put(schedulerNode(row));
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
    return this.keys.authenticate(secret);
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
      const before = this.index.get(id);
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
   * What the scheduler sees, read whole: nodes whose owner is not suspended (a suspended owner's open channel gets no
   * new work). Each read reloads the scheduler's view (index). Read in pages of FULL_READ_PAGE rows in the order of
   * their ids, each parsed on its own, so that a large fleet's read does not hold the event loop for all its rows
   * at once (a node written meanwhile is in the view as written: see NodeIndex.load).
   *
   * Every caller gets a read that began after it asked, and callers share reads (SharedRead): a burst of
   * dispatches that all need the whole registry (the first after a boot, or many answered no_capacity) costs at
   * most two reads, not one each.
   */
  snapshots(): Promise<SchedulerNode[]> {
    return this.wholeReads.run();
  }

  private async readWhole(): Promise<SchedulerNode[]> {
    const read = this.index.begin();
    const keysRead = this.keys.begin();
    const at = this.clock.now();
    const since = await this.dbNow();
    const nodes: SchedulerNode[] = [];
    const keys: Array<{ keyHash: string; nodeId: string; accountId: string }> = [];
    for (let after = ''; ; ) {
      const rows = await this.db
        .selectFrom('nodes as n')
        .innerJoin('accounts as a', 'a.id', 'n.account_id')
        .select([...SCHEDULER_COLUMNS.map((c) => `n.${c}` as const), 'n.key_hash', 'n.account_id'])
        .where('a.suspended_at', 'is', null)
        .where('n.id', '>', after)
        .orderBy('n.id')
        .limit(FULL_READ_PAGE)
        .execute();
      for (const r of rows) {
        nodes.push(schedulerNode(r));
        keys.push({ keyHash: r.key_hash, nodeId: r.id, accountId: r.account_id });
      }
      if (rows.length < FULL_READ_PAGE) break;
      after = rows[rows.length - 1]!.id;
    }
    this.index.load(read, nodes, at);
    this.keys.replace(keysRead, keys);
    this.readSince = since;
    this.fullReadAt = at.getTime();
    return nodes;
  }

  /** The database's clock now (rows' changed_at come from it, not from this process's clock). */
  private async dbNow(): Promise<Date> {
    const r = await sql<{ now: Date }>`select clock_timestamp() as now`.execute(this.db);
    return new Date(r.rows[0]!.now);
  }

  /**
   * Brings the view up to date with the rows written since the last read, by any process (nodes.changed_at, from
   * the database's clock), from CHANGES_OVERLAP_MS before that read began: a transaction that wrote before it and
   * committed after it is read the next time. A node whose owner is suspended now leaves the view. Falls back
   * to a full read when none was made yet or the last is FULL_READ_MS old (what no changed row says: a
   * suspension, a node deleted).
   */
  async refresh(): Promise<void> {
    const now = this.clock.now();
    if (this.readSince === null || this.fullReadAt === null || now.getTime() - this.fullReadAt >= FULL_READ_MS) {
      await this.snapshots();
      return;
    }
    const read = this.index.begin();
    const since = await this.dbNow();
    const rows = await this.db
      .selectFrom('nodes as n')
      .innerJoin('accounts as a', 'a.id', 'n.account_id')
      .select([...SCHEDULER_COLUMNS.map((c) => `n.${c}` as const), 'a.suspended_at'])
      .where('n.changed_at', '>', new Date(this.readSince.getTime() - CHANGES_OVERLAP_MS))
      .execute();
    const nodes: SchedulerNode[] = [];
    const gone: string[] = [];
    for (const r of rows) {
      if (r.suspended_at) gone.push(r.id);
      else nodes.push(schedulerNode(r));
    }
    this.index.merge(read, nodes, gone, now);
    this.readSince = since;
  }

  /**
   * The scheduler's view without reading the registry whole: as loaded and kept in step (NodeIndex). A view older
   * than its refresh period is brought up to date in the background (refresh: the changed rows only); the first
   * full read is waited for.
   */
  async candidates(): Promise<IterableIterator<SchedulerNode>> {
    await this.current();
    return this.index.all();
  }

  /** The same view in the scheduler's order, best first (scheduler.ts, pickRanked). */
  async ranked(): Promise<IterableIterator<SchedulerNode>> {
    await this.current();
    return this.index.ranked();
  }

  private async current(): Promise<void> {
    if (!this.index.loaded) await (this.wholeReads.current ?? this.snapshots()); // any full read loads the view
    else if (this.index.stale && !this.refreshing) {
      this.refreshing = this.refresh()
        .catch(() => undefined)
        .finally(() => (this.refreshing = null));
    }
  }

  /** One node as the scheduler sees it now, read from its row (null: unknown, or its owner is suspended); the view follows. */
  async fresh(nodeId: string): Promise<SchedulerNode | null> {
    const row = await this.db
      .selectFrom('nodes as n')
      .innerJoin('accounts as a', 'a.id', 'n.account_id')
      .select([...SCHEDULER_COLUMNS.map((c) => `n.${c}` as const), 'a.suspended_at'])
      .where('n.id', '=', nodeId)
      .executeTakeFirst();
    if (!row || row.suspended_at) {
      this.index.drop(nodeId);
      return null;
    }
    const node = schedulerNode(row);
    this.index.put(node);
    return node;
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
