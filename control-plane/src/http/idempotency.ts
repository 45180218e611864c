import type { Kysely } from 'kysely';
import { ServiceError, sha256Hex, type Clock } from '@svc/shared';
import type { DB } from '../db/schema.ts';

export type IdempotencyOutcome = { kind: 'new' } | { kind: 'replay'; statusCode: number; body: unknown; headers: Record<string, string> };

const KEY = /^[\x21-\x7e]{1,255}$/;
const TTL_MS = 24 * 3600_000;

/**
 * Idempotency-Key: the first request with a key runs and its answer is stored; the same key with the same
 * body returns that answer without running or billing again; the same key with another body is refused
 * (409 idempotency_conflict), and so is a retry while the first is still running. A request that failed
 * frees its key so it can be retried. Keys live 24 hours.
 */
export class Idempotency {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
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
      .values({ account_id: accountId, route, key, body_sha256: bodySha, state: 'in_progress', status_code: null, response: null, headers: null, created_at: now })
      .onConflict((oc) => oc.columns(['account_id', 'route', 'key']).doNothing())
      .returning('key')
      .executeTakeFirst();
    if (inserted) return { kind: 'new' };
    const row = await this.db.selectFrom('idempotency_keys').selectAll().where('account_id', '=', accountId).where('route', '=', route).where('key', '=', key).executeTakeFirstOrThrow();
    if (row.body_sha256 !== bodySha) throw new ServiceError('idempotency_conflict', 'This Idempotency-Key was used with a different request body');
    if (row.state !== 'done') throw new ServiceError('idempotency_conflict', 'A request with this Idempotency-Key is still running; retry when it has finished');
    return { kind: 'replay', statusCode: row.status_code ?? 200, body: row.response, headers: row.headers ?? {} };
  }

  async complete(accountId: string, route: string, key: string, statusCode: number, body: unknown, headers: Record<string, string>): Promise<void> {
    await this.db
      .updateTable('idempotency_keys')
      .set({ state: 'done', status_code: statusCode, response: JSON.stringify(body), headers: JSON.stringify(headers) })
      .where('account_id', '=', accountId)
      .where('route', '=', route)
      .where('key', '=', key)
      .execute();
  }

  async abandon(accountId: string, route: string, key: string): Promise<void> {
    await this.db.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('route', '=', route).where('key', '=', key).where('state', '=', 'in_progress').execute();
  }

  async purgeExpired(): Promise<number> {
    const r = await this.db.deleteFrom('idempotency_keys').where('created_at', '<', new Date(this.clock.now().getTime() - TTL_MS)).executeTakeFirst();
    return Number(r.numDeletedRows);
  }
}
