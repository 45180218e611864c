import { sql, type Kysely } from 'kysely';
import { Sealer, randomId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { signatureHeaders } from './signing.ts';
import { Refused } from './outbound.ts';
import { postDelivery } from './post.ts';
import type { SelfAddress } from './url.ts';

/**
 * Retry schedule: after a failed attempt n (non-2xx, redirect, network error or timeout) the next attempt
 * is due RETRY_SCHEDULE_SECONDS[n-1] later: 30 s, 2 min, 10 min, 1 h, 6 h. The 6th failed attempt gives
 * up: the delivery is marked `failed`. No jitter, so the schedule is exact.
 */
export const RETRY_SCHEDULE_SECONDS = [30, 120, 600, 3600, 21_600] as const;
export const MAX_ATTEMPTS = RETRY_SCHEDULE_SECONDS.length + 1;
/** Delivered, failed and cancelled history (events, deliveries, attempts) is kept this long. */
export const HISTORY_DAYS = 30;
const BATCH = 50;

interface Claimed {
  id: string;
  event_id: string;
  webhook_id: string;
  attempts: number;
  type: string;
  account_id: string;
  data: Record<string, unknown>;
  event_created_at: Date;
  url: string;
  secret_sealed: string;
  enabled: boolean;
}

export interface SenderOptions {
  timeoutMs: number;
  self: SelfAddress;
}

/**
 * The outbox's send side, run by the leader's loop. Each run claims due deliveries with a lease (on
 * Postgres `for update skip locked`, so processes never claim the same row; a lease that outlives a dead
 * sender expires), sends each as one signed POST with a timeout, records the attempt and schedules the
 * retry. Everything lives in the database: a restarted control plane picks up where the last one stopped.
 */
export class WebhookSender {
  private readonly sealer: Sealer;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    sealKey: Uint8Array,
    private readonly opts: SenderOptions,
  ) {
    this.sealer = new Sealer(sealKey);
  }

  /** Sends every delivery due now (in batches); returns how many attempts were made. */
  async deliverDue(): Promise<number> {
    let total = 0;
    for (let round = 0; round < 20; round++) {
      const claimed = await this.claim();
      if (claimed.rows.length === 0) break;
      await Promise.all(claimed.rows.map((r) => this.send(r, claimed.token)));
      total += claimed.rows.length;
      if (claimed.rows.length < BATCH) break;
    }
    return total;
  }

  private async claim(): Promise<{ token: string; rows: Claimed[] }> {
    const now = this.clock.now();
    const token = randomId(20);
    const leaseUntil = new Date(now.getTime() + this.opts.timeoutMs + 60_000);
    const r = await sql<Claimed>`
      with c as (
        update webhook_deliveries set claim_token = ${token}, claimed_until = ${leaseUntil}, updated_at = ${now}
        where id in (
          select id from webhook_deliveries
          where status = 'pending' and next_attempt_at <= ${now} and (claimed_until is null or claimed_until <= ${now})
          order by next_attempt_at, id limit ${BATCH}
          for update skip locked)
        returning id, event_id, webhook_id, attempts)
      select c.id, c.event_id, c.webhook_id, c.attempts, e.type, e.account_id, e.data, e.created_at as event_created_at,
        w.url, w.secret_sealed, w.enabled
      from c join webhook_events e on e.id = c.event_id join webhooks w on w.id = c.webhook_id`.execute(this.db);
    return { token, rows: r.rows };
  }

  private async send(row: Claimed, token: string): Promise<void> {
    const at = this.clock.now();
    if (!row.enabled) {
      await this.db
        .updateTable('webhook_deliveries')
        .set({ status: 'canceled', next_attempt_at: null, claim_token: null, claimed_until: null, updated_at: at })
        .where('id', '=', row.id)
        .where('claim_token', '=', token)
        .execute();
      return;
    }
    const attempt = row.attempts + 1;
    const body = JSON.stringify({ id: row.event_id, type: row.type, timestamp: row.event_created_at.toISOString(), account_id: row.account_id, data: row.data });
    let status: number | null = null;
    let error: string | null = null;
    const started = performance.now();
    try {
      const url = new URL(row.url);
      const secret = this.sealer.open(Buffer.from(row.secret_sealed, 'base64'), row.webhook_id).toString('utf8');
      status = await postDelivery(
        url,
        { 'content-type': 'application/json', 'user-agent': 'svc-gateway-webhooks/1', ...signatureHeaders(secret, row.event_id, at, body) },
        body,
        { self: this.opts.self, signal: AbortSignal.timeout(this.opts.timeoutMs) },
      );
      if (status < 200 || status > 299) error = status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`;
    } catch (e) {
      error = describe(e, this.opts.timeoutMs);
    }
    const durationMs = Math.max(0, Math.round(performance.now() - started));
    const outcome = error === null ? 'delivered' : attempt >= MAX_ATTEMPTS ? 'failed' : 'retrying';
    const next = outcome === 'retrying' ? new Date(at.getTime() + RETRY_SCHEDULE_SECONDS[attempt - 1]! * 1000) : null;
    await this.db.transaction().execute(async (trx) => {
      const u = await trx
        .updateTable('webhook_deliveries')
        .set({
          status: outcome === 'retrying' ? 'pending' : outcome,
          attempts: attempt,
          next_attempt_at: next,
          claim_token: null,
          claimed_until: null,
          last_status_code: status,
          last_error: error,
          updated_at: this.clock.now(),
        })
        .where('id', '=', row.id)
        .where('claim_token', '=', token)
        .executeTakeFirst();
      // A lease that ran out means another sender owns the delivery now; its attempt is the one recorded.
      if (Number(u.numUpdatedRows) === 0) return;
      await trx
        .insertInto('webhook_attempts')
        .values({ delivery_id: row.id, webhook_id: row.webhook_id, event_id: row.event_id, event_type: row.type, attempt, status_code: status, error, duration_ms: durationMs, outcome, at })
        .execute();
    });
  }

  /** Drops history older than HISTORY_DAYS: events with nothing pending, with their deliveries and attempts. */
  async prune(): Promise<number> {
    const cutoff = new Date(this.clock.now().getTime() - HISTORY_DAYS * 86_400_000);
    const r = await sql<{ id: string }>`
      delete from webhook_events e where e.created_at < ${cutoff}
        and not exists (select 1 from webhook_deliveries d where d.event_id = e.id and d.status = 'pending')
      returning e.id`.execute(this.db);
    return r.rows.length;
  }
}

function describe(e: unknown, timeoutMs: number): string {
  if (e instanceof Refused) return e.message;
  const err = e as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err.name === 'TimeoutError' || err.name === 'AbortError') return `timed out after ${timeoutMs / 1000} s`;
  const cause = err.cause;
  const text = cause?.message ?? err.message ?? String(e);
  return (cause?.code && !text.includes(cause.code) ? `${cause.code}: ${text}` : text).slice(0, 300);
}
