import type { Kysely, Selectable } from 'kysely';
import {
  FileListResult,
  FileReadResult,
  MAX_FILE_BYTES,
  SANDBOX_ERRORS,
  SANDBOX_JOBS,
  ServiceError,
  SessionCreateResult,
  SnapshotCreateResult,
  newId,
  notFound,
  workspacePath,
  WORKSPACE,
  type Clock,
} from '@svc/shared';
import type { SandboxConfig } from '../../config.ts';
import type { DB, SandboxSessionsTable } from '../../db/schema.ts';
import type { AgentHub } from '../../fleet/hub.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { isOnline } from '../../fleet/scheduler.ts';
import { WriteBatch } from '../../fleet/write-batch.ts';
import type { NodeRegistry } from '../../fleet/registry.ts';

type SessionRow = Selectable<SandboxSessionsTable>;
const JOB_TIMEOUT_MS = 60_000;
/** A session this close to its idle timeout may have been ended by its agent already: not counted lost. */
const IDLE_MARGIN_MS = 5_000;

const lostError = (id: string) =>
  new ServiceError('conflict', `Sandbox session ${id} was lost: its node no longer holds its container (the node agent restarted or lost it); open a new session`, { reason: 'session_lost' });

/** Maps a sandbox job's failure message to a clear status. */
export function sandboxError(e: unknown): never {
  const msg = e instanceof Error ? e.message : String(e);
  if (msg.includes(SANDBOX_ERRORS.badPath)) throw new ServiceError('invalid_request', 'path: must stay inside the workspace (no "..", no absolute path elsewhere)', { param: 'path' });
  if (msg.includes(SANDBOX_ERRORS.notFound)) throw new ServiceError('not_found', msg.replace(/^.*sandbox_not_found:?\s*/, '') || 'Not found in the workspace');
  if (msg.includes(SANDBOX_ERRORS.tooLarge)) throw new ServiceError('payload_too_large', `Workspace files are limited to ${MAX_FILE_BYTES} bytes`);
  if (msg.includes(SANDBOX_ERRORS.busy)) throw new ServiceError('conflict', msg.replace(/^.*sandbox_busy:?\s*/, ''), { reason: 'terminal_limit' });
  throw e;
}

/** Persistent sandbox sessions: one container on one node, its workspace files and snapshots. */
export class SandboxSessions {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly hub: AgentHub,
    private readonly registry: NodeRegistry,
    private readonly cfg: SandboxConfig,
  ) {}

  /**
   * Whether the session's node can take its work now: its channel is up (on this process or another) and it
   * heartbeats. Read at once from the channel, so a session whose agent dropped reads node_offline right away.
   */
  private async nodeUp(nodeId: string | null): Promise<boolean> {
    if (!nodeId || !(await this.hub.reachable(nodeId))) return false;
    const n = await this.registry.get(nodeId).catch(() => null);
    return n !== null && isOnline({ lastHeartbeatAt: n.last_heartbeat_at }, this.clock.now());
  }

  private expired(r: SessionRow, now: Date, marginMs = 0): boolean {
    return r.status === 'running' && now.getTime() - r.last_active_at.getTime() > r.idle_timeout_seconds * 1000 - marginMs;
  }

  /** The session as the API shows it; `nodes` shares node lookups across the rows of one answer. */
  async view(r: SessionRow, nodes = new Map<string, Promise<boolean>>()) {
    const now = this.clock.now();
    const stoppedAt = r.stopped_at ?? (this.expired(r, now) ? new Date(r.last_active_at.getTime() + r.idle_timeout_seconds * 1000) : null);
    let status: SessionRow['status'] | 'node_offline' = r.status === 'lost' ? 'lost' : stoppedAt ? 'stopped' : r.status;
    if (status === 'running' && r.node_id) {
      if (!nodes.has(r.node_id)) nodes.set(r.node_id, this.nodeUp(r.node_id));
      if (!(await nodes.get(r.node_id))) status = 'node_offline';
    }
    return {
      id: r.id,
      object: 'sandbox.session' as const,
      status,
      node_id: r.node_id,
      network: r.network,
      alive_seconds: Math.max(0, Math.floor(((stoppedAt ?? now).getTime() - r.created_at.getTime()) / 1000)),
      exec_count: r.exec_count,
      cost_micro_usd: r.cost_micro_usd,
      idle_timeout_seconds: r.idle_timeout_seconds,
      snapshot_id: r.snapshot_id,
      image_digest: r.image_digest,
      created_at: r.created_at.toISOString(),
      last_active_at: r.last_active_at.toISOString(),
      stopped_at: stoppedAt?.toISOString() ?? null,
    };
  }

  /**
   * An agent said on connect which sessions it holds: the node's other running sessions are lost (their
   * containers went with an agent restart, say). Not those idle-expired, or about to be (the agent ends a
   * session at its idle timeout too), nor one that became active after the agent said so. The hellos that come
   * while one such read is under way are read together in the next (a fleet reconnecting after a control-plane
   * restart says hello thousands of times within seconds): one read and at most one write per round.
   */
  held(nodeId: string, held: string[]): Promise<void> {
    return this.hellos.add(nodeId, held).then(() => undefined);
  }

  private readonly hellos = new WriteBatch<string, string[], true>(
    (items) => this.loseUnheld(items),
    (nodeId) => new Error(`the sessions of node ${nodeId} were not read`),
  );

  private async loseUnheld(items: Array<{ key: string; value: string[] }>): Promise<Map<string, true>> {
    const now = this.clock.now();
    const keep = new Map(items.map((i) => [i.key, new Set(i.value)]));
    const rows = await this.db.selectFrom('sandbox_sessions').selectAll().where('node_id', 'in', [...keep.keys()]).where('status', '=', 'running').where('stopped_at', 'is', null).execute();
    const lost = rows.filter((r) => !keep.get(r.node_id!)?.has(r.id) && !this.expired(r, now, IDLE_MARGIN_MS)).map((r) => r.id);
    if (lost.length) {
      await this.db
        .updateTable('sandbox_sessions')
        .set({ status: 'lost', stopped_at: now })
        .where('id', 'in', lost)
        .where('status', '=', 'running')
        .where('stopped_at', 'is', null)
        .where('last_active_at', '<=', now)
        .execute();
    }
    return new Map(items.map((i) => [i.key, true as const]));
  }

  /** A job found the session gone from its node (`no session ... on this node`): it is lost; a 409 says so. */
  private async lostOnNode(id: string, e: unknown): Promise<void> {
    const msg = e instanceof Error ? e.message : String(e);
    if (!msg.includes(SANDBOX_ERRORS.notFound) || !msg.includes(`no session ${id} on this node`)) return;
    await this.db.updateTable('sandbox_sessions').set({ status: 'lost', stopped_at: this.clock.now() }).where('id', '=', id).where('status', '=', 'running').where('stopped_at', 'is', null).execute();
    throw lostError(id);
  }

  async row(accountId: string, id: string): Promise<SessionRow> {
    const r = await this.db.selectFrom('sandbox_sessions').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    if (!r) throw notFound('Sandbox session');
    return r;
  }

  /** A session that can take work now: running, not idle-expired, its node reachable. */
  async live(accountId: string, id: string): Promise<SessionRow> {
    const r = await this.row(accountId, id);
    if (r.status === 'lost') throw lostError(id);
    if (r.status !== 'running' || r.stopped_at || this.expired(r, this.clock.now())) throw new ServiceError('conflict', `Sandbox session ${id} is stopped`);
    if (!(await this.hub.reachable(r.node_id ?? ''))) throw new ServiceError('no_capacity', `The node running session ${id} is offline; the session is reported as node_offline`, { retry_after: 30 });
    return r;
  }

  async create(p: KeyPrincipal, input: { env?: Record<string, string> | undefined; network?: boolean | undefined; idle_timeout_seconds?: number | undefined; snapshot_id?: string | undefined }) {
    if (input.network && !this.cfg.networkAllowed) throw new ServiceError('forbidden', 'network: this deployment does not allow network access from sandboxes');
    let nodeId: string | undefined;
    if (input.snapshot_id) {
      const snap = await this.db.selectFrom('sandbox_snapshots').selectAll().where('id', '=', input.snapshot_id).where('account_id', '=', p.accountId).where('deleted_at', 'is', null).executeTakeFirst();
      if (!snap) throw new ServiceError('not_found', 'Snapshot not found', { param: 'snapshot_id' });
      nodeId = snap.node_id;
    }
    const now = this.clock.now();
    const id = newId('sbx_', 20);
    const idle = input.idle_timeout_seconds ?? this.cfg.sessionIdleSeconds;
    await this.db
      .insertInto('sandbox_sessions')
      .values({ id, account_id: p.accountId, key_id: p.keyId, node_id: nodeId ?? null, status: 'starting', network: input.network ?? false, idle_timeout_seconds: idle, snapshot_id: input.snapshot_id ?? null, image_digest: null, created_at: now, last_active_at: now, stopped_at: null })
      .execute();
    try {
      const job = await this.hub.dispatch({
        kind: SANDBOX_JOBS.sessionCreate,
        nodeKind: 'sandbox',
        nodeId,
        accountId: p.accountId,
        timeoutMs: JOB_TIMEOUT_MS,
        payload: { session_id: id, env: input.env ?? {}, network: input.network ?? false, limits: this.cfg.limits, idle_timeout_ms: idle * 1000, ...(input.snapshot_id ? { snapshot_id: input.snapshot_id } : {}) },
      });
      const res = SessionCreateResult.parse(job.result);
      const row = await this.db
        .updateTable('sandbox_sessions')
        .set({ status: 'running', node_id: job.nodeId, image_digest: res.image_digest, last_active_at: this.clock.now() })
        .where('id', '=', id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return this.view(row);
    } catch (e) {
      await this.db.updateTable('sandbox_sessions').set({ status: 'failed', stopped_at: this.clock.now() }).where('id', '=', id).execute();
      throw e;
    }
  }

  async list(accountId: string) {
    const rows = await this.db.selectFrom('sandbox_sessions').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(100).execute();
    const nodes = new Map<string, Promise<boolean>>();
    return Promise.all(rows.map((r) => this.view(r, nodes)));
  }

  /** Stops a session; idempotent. The node is told when it is reachable; the reaper covers the rest. */
  async stop(accountId: string, id: string) {
    const r = await this.row(accountId, id);
    if (!r.stopped_at && r.node_id && (await this.hub.reachable(r.node_id))) {
      await this.hub.dispatch({ kind: SANDBOX_JOBS.sessionStop, nodeKind: 'sandbox', nodeId: r.node_id, timeoutMs: JOB_TIMEOUT_MS, payload: { session_id: id } }).catch(() => undefined);
    }
    const row = await this.db
      .updateTable('sandbox_sessions')
      .set({ status: 'stopped', stopped_at: r.stopped_at ?? this.clock.now() })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.view(row);
  }

  /** An exec's failure: a session its node no longer holds is lost (409); the rest map as sandboxError does. */
  async execFailed(id: string, e: unknown): Promise<never> {
    await this.lostOnNode(id, e);
    sandboxError(e);
  }

  async recordExec(id: string, cost: number): Promise<void> {
    await this.db
      .updateTable('sandbox_sessions')
      .set((eb) => ({ exec_count: eb('exec_count', '+', 1), cost_micro_usd: eb('cost_micro_usd', '+', cost), last_active_at: this.clock.now() }))
      .where('id', '=', id)
      .execute();
  }

  /** Sessions in use without execs (an open terminal): active now, so their idle timeout starts over. */
  async touch(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.db.updateTable('sandbox_sessions').set({ last_active_at: this.clock.now() }).where('id', 'in', ids).where('status', '=', 'running').where('stopped_at', 'is', null).execute();
  }

  private async fileJob(accountId: string, id: string, kind: string, payload: Record<string, unknown>) {
    const r = await this.live(accountId, id);
    try {
      const job = await this.hub.dispatch({ kind, nodeKind: 'sandbox', nodeId: r.node_id!, accountId, timeoutMs: JOB_TIMEOUT_MS, retryable: false, payload: { session_id: id, ...payload } });
      await this.db.updateTable('sandbox_sessions').set({ last_active_at: this.clock.now() }).where('id', '=', id).execute();
      return job.result;
    } catch (e) {
      await this.lostOnNode(id, e);
      sandboxError(e);
    }
  }

  /** The path relative to the workspace ('' is the workspace itself: no path, ".", "/workspace"), else 400. */
  static checkPath(path: string): string {
    const p = path === '' ? '' : workspacePath(path);
    if (p === null) throw new ServiceError('invalid_request', 'path: must stay inside the workspace (no "..", no absolute path elsewhere)', { param: 'path' });
    return p;
  }

  /** The path as sent to the node: the workspace itself by its absolute name (an empty path is refused there). */
  private static wire(p: string): string {
    return p === '' ? WORKSPACE : p;
  }

  async writeFile(accountId: string, id: string, path: string, bytes: Buffer) {
    const p = SandboxSessions.checkPath(path);
    if (!p) throw new ServiceError('invalid_request', 'path: name a file, not the workspace itself', { param: 'path' });
    await this.fileJob(accountId, id, SANDBOX_JOBS.fileWrite, { path: p, content_b64: bytes.toString('base64') });
    return { path: p, bytes: bytes.length };
  }

  async readFile(accountId: string, id: string, path: string): Promise<Buffer> {
    const p = SandboxSessions.checkPath(path);
    const res = FileReadResult.parse(await this.fileJob(accountId, id, SANDBOX_JOBS.fileRead, { path: SandboxSessions.wire(p) }));
    return Buffer.from(res.content_b64, 'base64');
  }

  async listFiles(accountId: string, id: string, path: string) {
    const p = SandboxSessions.checkPath(path);
    return FileListResult.parse(await this.fileJob(accountId, id, SANDBOX_JOBS.fileList, { path: SandboxSessions.wire(p) }));
  }

  async snapshot(accountId: string, id: string) {
    const r = await this.live(accountId, id);
    const snapshotId = newId('snap_', 20);
    const res = SnapshotCreateResult.parse(await this.fileJob(accountId, id, SANDBOX_JOBS.snapshotCreate, { snapshot_id: snapshotId }));
    const row = await this.db
      .insertInto('sandbox_snapshots')
      .values({ id: snapshotId, account_id: accountId, session_id: id, node_id: r.node_id!, bytes: res.bytes, sha256: res.sha256, created_at: this.clock.now(), deleted_at: null })
      .returningAll()
      .executeTakeFirstOrThrow();
    return snapshotView(row);
  }

  async snapshots(accountId: string) {
    const rows = await this.db.selectFrom('sandbox_snapshots').selectAll().where('account_id', '=', accountId).where('deleted_at', 'is', null).orderBy('created_at', 'desc').limit(100).execute();
    return rows.map(snapshotView);
  }

  async getSnapshot(accountId: string, id: string) {
    const row = await this.db.selectFrom('sandbox_snapshots').selectAll().where('account_id', '=', accountId).where('id', '=', id).where('deleted_at', 'is', null).executeTakeFirst();
    if (!row) throw notFound('Snapshot');
    return row;
  }

  /** Deletes the archive on its node, then the record; the node must be reachable. */
  async deleteSnapshot(accountId: string, id: string) {
    const row = await this.getSnapshot(accountId, id);
    if (!(await this.hub.reachable(row.node_id))) throw new ServiceError('no_capacity', 'The node holding this snapshot is offline; retry when it is back', { retry_after: 30 });
    await this.hub.dispatch({ kind: SANDBOX_JOBS.snapshotDelete, nodeKind: 'sandbox', nodeId: row.node_id, timeoutMs: JOB_TIMEOUT_MS, retryable: false, payload: { snapshot_id: id } });
    await this.db.updateTable('sandbox_snapshots').set({ deleted_at: this.clock.now() }).where('id', '=', id).execute();
    return { id, object: 'sandbox.snapshot' as const, deleted: true };
  }

  /** Leader loop: marks idle-expired sessions stopped and tells their nodes. */
  async reapIdle(): Promise<number> {
    const now = this.clock.now();
    const rows = await this.db.selectFrom('sandbox_sessions').selectAll().where('status', '=', 'running').where('stopped_at', 'is', null).execute();
    let n = 0;
    for (const r of rows.filter((x) => this.expired(x, now))) {
      await this.stop(r.account_id, r.id);
      n++;
    }
    return n;
  }
}

export function snapshotView(r: { id: string; session_id: string; node_id: string; bytes: number; sha256: string; created_at: Date }) {
  return { id: r.id, object: 'sandbox.snapshot' as const, session_id: r.session_id, node_id: r.node_id, bytes: Number(r.bytes), sha256: r.sha256, created_at: r.created_at.toISOString() };
}
