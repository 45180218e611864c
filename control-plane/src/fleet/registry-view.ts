import { sql, type Kysely, type Selectable } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB, NodesTable } from '../db/schema.ts';
import { NODE_INDEX_REFRESH_MS, NodeIndex } from './node-index.ts';
import { NodeKeys } from './node-keys.ts';
import type { NodeSnapshot } from './scheduler.ts';
import { SharedRead } from './shared-read.ts';

type NodeRow = Selectable<NodesTable>;

/** What the scheduler sees of a node: its snapshot, the model names it maps, and which process holds its channel. */
export type SchedulerNode = NodeSnapshot & { modelMap: Record<string, string>; channel: string | null; channelEpoch: number | null };

/** The columns the scheduler reads (a full read of the registry adds only key hashes and owners, for NodeKeys: no capabilities or names). */
const SCHEDULER_COLUMNS = ['id', 'kinds', 'models', 'model_map', 'speed_factor', 'approved', 'disabled', 'draining', 'last_heartbeat_at', 'running_jobs', 'succeeded', 'failed', 'latency_ms', 'channel_process', 'channel_epoch'] as const;
export type SchedulerRow = Pick<NodeRow, (typeof SCHEDULER_COLUMNS)[number]>;
/** The scheduler's columns of `nodes n`, for a write's RETURNING whose rows go to `written`. */
export const SCHEDULER_RETURNING = sql.raw(SCHEDULER_COLUMNS.map((c) => `n.${c}`).join(', '));
/**
 * Rows per page of a read of the scheduler's view (full, or of the changed rows): each page is parsed and folded in
 * between the event loop's other work, about 40 µs a row, so no read holds a dispatch up by more than about 10 ms.
 */
export const READ_PAGE = 250;
/** How often the scheduler's view is read whole; between, its refreshes read only the rows changed since the last read. */
export const FULL_READ_MS = 300_000;
/** How far before the last read a refresh reads changed rows from: a write committed that much after its row was stamped is still seen. */
export const CHANGES_OVERLAP_MS = 5_000;

/** A node's row as the scheduler sees it. */
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

/**
 * The scheduler's view of the registry, in memory: loaded by full reads (at boot, then every FULL_READ_MS),
 * refreshed between them from the rows changed since the last read, and kept in step by the registry's own writes
 * (`index.put`); the node keys of the nodes it holds come with each full read (NodeKeys).
 */
export class RegistryView {
  /** The scheduler's nodes (see NodeIndex). */
  readonly index: NodeIndex<SchedulerNode>;
  /** The node keys this process trusts without a read (kept whole by full reads, dropped for an account that changed). */
  readonly keys: NodeKeys;
  private refreshing: Promise<unknown> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly wholeReads = new SharedRead(() => this.readWhole());
  /** The database's clock when the last read of the view began (the next reads rows changed since, less an overlap). */
  private readSince: Date | null = null;
  /** This process's clock at the last full read. */
  private fullReadAt: number | null = null;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    /** This process (`Database.processId`): rows it wrote last (nodes.changed_by) are in the view as written. */
    private readonly self: string,
  ) {
    this.index = new NodeIndex(clock);
    this.keys = new NodeKeys(db, clock);
  }

  /** Rows this process wrote (RETURNING the scheduler's columns, SCHEDULER_RETURNING), into the view as committed. */
  written(rows: readonly SchedulerRow[]): void {
    for (const r of rows) this.index.put(schedulerNode(r));
  }

  /**
   * What the scheduler sees, read whole: nodes whose owner is not suspended (a suspended owner's open channel gets no
   * new work). Each read reloads the scheduler's view (index). Read in pages of READ_PAGE rows in the order of
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
    const page = (after: string) => this.rows().select(['n.key_hash', 'n.account_id']).where('a.suspended_at', 'is', null).where('n.id', '>', after).orderBy('n.id').limit(READ_PAGE).execute();
    for await (const rows of inPages(page)) {
      for (const r of rows) {
        nodes.push(schedulerNode(r));
        keys.push({ keyHash: r.key_hash, nodeId: r.id, accountId: r.account_id });
      }
    }
    this.index.load(read, nodes, at);
    this.keys.replace(keysRead, keys);
    this.readSince = since;
    this.fullReadAt = at.getTime();
    return nodes;
  }

  /** Node rows with their owner (`n`, `a`), the scheduler's columns selected. */
  private rows() {
    return this.db
      .selectFrom('nodes as n')
      .innerJoin('accounts as a', 'a.id', 'n.account_id')
      .select(SCHEDULER_COLUMNS.map((c) => `n.${c}` as const));
  }

  /** The database's clock now (rows' changed_at come from it, not from this process's clock). */
  private async dbNow(): Promise<Date> {
    const r = await sql<{ now: Date }>`select clock_timestamp() as now`.execute(this.db);
    return new Date(r.rows[0]!.now);
  }

  /**
   * Brings the view up to date with the rows other processes wrote since the last read (nodes.changed_at, from
   * the database's clock; this process's own writes, nodes.changed_by, went into the view as they committed, so a
   * single replica reads none), from CHANGES_OVERLAP_MS before that read began: a transaction that wrote before it and
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
    const from = new Date(this.readSince.getTime() - CHANGES_OVERLAP_MS);
    // In pages, as a full read is: a row written again meanwhile is read now or next time.
    const page = (after: string) =>
      this.rows()
        .select('a.suspended_at')
        .where('n.changed_at', '>', from)
        .where('n.changed_by', 'is distinct from', this.self) // this process's own writes went into the view as they committed
        .where('n.id', '>', after)
        .orderBy('n.id')
        .limit(READ_PAGE)
        .execute();
    for await (const rows of inPages(page)) {
      const nodes: SchedulerNode[] = [];
      const gone: string[] = [];
      for (const r of rows) {
        if (r.suspended_at) gone.push(r.id);
        else nodes.push(schedulerNode(r));
      }
      this.index.merge(read, nodes, gone, now);
    }
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

  /**
   * Loads the view now, behind the first answers of a boot, and from then on refreshes it every
   * NODE_INDEX_REFRESH_MS whether or not anything dispatches: each refresh then takes the few rows of one period, and
   * the first dispatch after a quiet spell (or through a replica the traffic had not reached) does not come with a
   * catch-up read of every row the other processes changed meanwhile.
   */
  start(onError: (e: unknown) => void, everyMs = NODE_INDEX_REFRESH_MS): void {
    void this.ranked().catch(onError);
    this.timer ??= setInterval(() => void this.current().catch(() => undefined), everyMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
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
    const row = await this.rows().select('a.suspended_at').where('n.id', '=', nodeId).executeTakeFirst();
    if (!row || row.suspended_at) {
      this.index.drop(nodeId);
      return null;
    }
    const node = schedulerNode(row);
    this.index.put(node);
    return node;
  }
}

/** The pages `page` reads (each of READ_PAGE rows at most, in the order of ids, from after the last one's id), one after another. */
async function* inPages<R extends { id: string }>(page: (afterId: string) => Promise<R[]>): AsyncGenerator<R[]> {
  for (let after = ''; ; ) {
    const rows = await page(after);
    yield rows;
    if (rows.length < READ_PAGE) return;
    after = rows[rows.length - 1]!.id;
  }
}
