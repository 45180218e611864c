import type { Kysely } from 'kysely';
import { ServiceError, sha256Hex, type Clock } from '@svc/shared';
import type { DB } from '../db/schema.ts';

export type IdempotencyOutcome = { kind: 'new' } | { kind: 'replay'; statusCode: number; body: unknown; headers: Record<string, string> };

/** This process and the liveness of others (`Database.processId`, `Database.processesAlive`). */
export interface Processes {
  processId: string;
  alive(ids: readonly string[]): Promise<Set<string>>;
}

const KEY = /^[\x21-\x7e]{1,255}$/;
const TTL_MS = 24 * 3600_000;
/**
 * A key's process is gone when it is missing from the database at two checks this far apart (one miss: its
 * LISTEN connection may be reopening, which it does a second after it drops).
 */
export const OWNER_GONE_AFTER_MS = 5_000;

type Row = { account_id: string; route: string; key: string; process_id: string | null; owner_missed_at: Date | null };

/**
 * Idempotency-Key: the first request with a key runs and its answer is stored; the same key with the same
 * body returns that answer without running or billing again; the same key with another body is refused
 * (409 idempotency_conflict), and so is a retry while the first is still running. A request that failed
 * frees its key so it can be retried. Keys live 24 hours.
 *
 * An in-progress key names the process running its request. A retry that finds that process gone from the
 * database (killed mid-request; missing at two checks OWNER_GONE_AFTER_MS apart, the first answered 409 with
 * `retry_after`) takes the key over with one conditional update and runs: of concurrent retries, one does.
 * The process that lost its key (it was not dead after all) no longer writes or frees it.
 */
export class Idempotency {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly processes: Processes,
  ) {}

  static digest(body: unknown): string {
    return sha256Hex(JSON.stringify(body ?? null));
  }

  async begin(accountId: string, route: string, key: string, bodySha: string): Promise<IdempotencyOutcome> {
    if (!KEY.test(key)) throw new ServiceError('invalid_request', 'Idempotency-Key: 1-255 printable ASCII characters', { param: 'Idempotency-Key' });
    const now = this.clock.now();
    await this.db.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('route', '=', route).where('key', '=', key).where('created_at', '<', new Date(now.getTime() - TTL_MS)).execute();
    const inserted = await this.db
      .insertInto('idempotency_keys')
      .values({ account_id: accountId, route, key, body_sha256: bodySha, state: 'in_progress', status_code: null, response: null, headers: null, created_at: now, process_id: this.processes.processId, owner_missed_at: null })
      .onConflict((oc) => oc.columns(['account_id', 'route', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) return { kind: 'new' };
    const row = await this.db.selectFrom('idempotency_keys').selectAll().where('account_id', '=', accountId).where('route', '=', route).where('key', '=', key).executeTakeFirst();
    if (!row) return this.begin(accountId, route, key, bodySha); // freed (failed or expired) in between
    if (row.body_sha256 !== bodySha) throw new ServiceError('idempotency_conflict', 'This Idempotency-Key was used with a different request body');
    if (row.state === 'done') return { kind: 'replay', statusCode: row.status_code ?? 200, body: row.response, headers: row.headers ?? {} };
    const owner = await this.ownerGone(row);
    if (owner === 'taken') return { kind: 'new' };
    if (owner === 'missing') {
      throw new ServiceError('idempotency_conflict', `The process running this Idempotency-Key's request is not answering; retry in ${OWNER_GONE_AFTER_MS / 1000} seconds`, { retry_after: OWNER_GONE_AFTER_MS / 1000 });
    }
    throw new ServiceError('idempotency_conflict', 'A request with this Idempotency-Key is still running; retry when it has finished');
  }

  /**
   * Whether the in-progress row's process is gone: 'running' (alive, this process, or unknown), 'missing'
   * (a first miss, recorded), or 'taken' (missing again OWNER_GONE_AFTER_MS later: the row is now this process's).
   */
  private async ownerGone(row: Row): Promise<'running' | 'missing' | 'taken'> {
    const owner = row.process_id;
    if (owner === null || owner === this.processes.processId) return 'running';
    const where = this.db
      .updateTable('idempotency_keys')
      .where('account_id', '=', row.account_id)
      .where('route', '=', row.route)
      .where('key', '=', row.key)
      .where('state', '=', 'in_progress')
      .where('process_id', '=', owner);
    if ((await this.processes.alive([owner])).has(owner)) {
      if (row.owner_missed_at) await where.set({ owner_missed_at: null }).execute();
      return 'running';
    }
    const now = this.clock.now();
    if (!row.owner_missed_at) {
      await where.set({ owner_missed_at: now }).where('owner_missed_at', 'is', null).execute();
      return 'missing';
    }
    if (now.getTime() - row.owner_missed_at.getTime() < OWNER_GONE_AFTER_MS) return 'missing';
    const taken = await where
      .set({ process_id: this.processes.processId, owner_missed_at: null, created_at: now })
      .where('owner_missed_at', '=', row.owner_missed_at)
      .returning('key')
      .executeTakeFirst();
    return taken ? 'taken' : 'running';
  }

  async complete(accountId: string, route: string, key: string, statusCode: number, body: unknown, headers: Record<string, string>): Promise<void> {
    await this.db
      .updateTable('idempotency_keys')
      .set({ state: 'done', status_code: statusCode, response: JSON.stringify(body), headers: JSON.stringify(headers), owner_missed_at: null })
      .where('account_id', '=', accountId)
      .where('route', '=', route)
      .where('key', '=', key)
      .where('process_id', '=', this.processes.processId)
      .execute();
  }

  async abandon(accountId: string, route: string, key: string): Promise<void> {
    await this.db
      .deleteFrom('idempotency_keys')
      .where('account_id', '=', accountId)
      .where('route', '=', route)
      .where('key', '=', key)
      .where('state', '=', 'in_progress')
      .where('process_id', '=', this.processes.processId)
      .execute();
  }

  async purgeExpired(): Promise<number> {
    const r = await this.db.deleteFrom('idempotency_keys').where('created_at', '<', new Date(this.clock.now().getTime() - TTL_MS)).executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
