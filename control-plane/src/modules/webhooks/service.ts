import { sql, type Kysely, type Selectable } from 'kysely';
import { Sealer, ServiceError, newId, notFound, type Clock } from '@svc/shared';
import type { DB, WebhookAttemptsTable, WebhooksTable } from '../../db/schema.ts';
import { isWebhookEventType, type WebhookEventType } from './events.ts';
import { newWebhookSecret } from './signing.ts';
import { checkWebhookUrl, type SelfAddress } from './url.ts';

export const DELIVERIES_CAP = 50;

export interface WebhookInput {
  url: string;
  events?: WebhookEventType[] | undefined;
  description?: string | undefined;
}

export interface WebhookView {
  id: string;
  object: 'webhook';
  url: string;
  events: string[] | null;
  description: string | null;
  enabled: boolean;
  created_at: string;
  disabled_at: string | null;
}

export interface AttemptView {
  delivery_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  next_attempt_at: string | null;
  at: string;
}

export interface EmitOptions {
  /** Emit inside this transaction, so the event commits (or not) with the change that caused it. */
  db?: Kysely<DB>;
  /** Deliver to this webhook only, whatever its event filter (the test event). */
  webhookId?: string;
}

/** The other modules' way to raise an event: fans out to the account's matching enabled webhooks. */
export interface EventEmitter {
  emit(accountId: string, type: WebhookEventType, data: Record<string, unknown>, opts?: EmitOptions): Promise<string | null>;
}

/**
 * Webhook endpoints and the outbox's write side. `emit` records an event and one pending delivery per
 * matching enabled webhook in one transaction; the sender (leader loop) delivers them. The signing secret
 * is generated here, returned once, and stored sealed (AES-256-GCM under the seal key, bound to the id).
 */
export class WebhookService implements EventEmitter {
  private readonly sealer: Sealer;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    sealKey: Uint8Array,
    private readonly self: SelfAddress,
  ) {
    this.sealer = new Sealer(sealKey);
  }

  async create(accountId: string, input: WebhookInput): Promise<WebhookView & { secret: string }> {
    const url = checkWebhookUrl(input.url, this.self);
    const events = input.events?.length ? [...new Set(input.events)] : null;
    const id = newId('wh_', 24);
    const secret = newWebhookSecret();
    const row = await this.db
      .insertInto('webhooks')
      .values({
        id,
        account_id: accountId,
        url,
        events: events ? JSON.stringify(events) : null,
        description: input.description ?? null,
        secret_sealed: this.sealer.seal(secret, id).toString('base64'),
        created_at: this.clock.now(),
        disabled_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { ...view(row), secret };
  }

  async list(accountId: string): Promise<WebhookView[]> {
    const rows = await this.db.selectFrom('webhooks').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id').execute();
    return rows.map(view);
  }

  private async own(accountId: string, id: string, db: Kysely<DB> = this.db) {
    const row = await db.selectFrom('webhooks').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    if (!row) throw notFound('Webhook');
    return row;
  }

  /** Disables a webhook (idempotent): nothing more is delivered to it, and its pending deliveries are cancelled. */
  async disable(accountId: string, id: string): Promise<WebhookView> {
    return this.db.transaction().execute(async (trx) => {
      const row = await this.own(accountId, id, trx);
      if (!row.enabled) return view(row);
      const now = this.clock.now();
      const updated = await trx.updateTable('webhooks').set({ enabled: false, disabled_at: now }).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
      await trx
        .updateTable('webhook_deliveries')
        .set({ status: 'canceled', next_attempt_at: null, claim_token: null, claimed_until: null, updated_at: now })
        .where('webhook_id', '=', id)
        .where('status', '=', 'pending')
        .execute();
      return view(updated);
    });
  }

  /** The last 50 delivery attempts of a webhook, newest first. */
  async attempts(accountId: string, id: string): Promise<AttemptView[]> {
    await this.own(accountId, id);
    const rows = await this.db
      .selectFrom('webhook_attempts as a')
      .innerJoin('webhook_deliveries as d', 'd.id', 'a.delivery_id')
      .selectAll('a')
      .select(['d.status as delivery_status', 'd.attempts as delivery_attempts', 'd.next_attempt_at as delivery_next_at'])
      .where('a.webhook_id', '=', id)
      .orderBy('a.id', 'desc')
      .limit(DELIVERIES_CAP)
      .execute();
    return rows.map((r) => attemptView(r, r.delivery_status === 'pending' && r.delivery_attempts === r.attempt ? r.delivery_next_at : null));
  }

  /** Enqueues a `webhook_test` event for this webhook. */
  async test(accountId: string, id: string): Promise<{ object: 'event'; id: string; type: 'webhook_test'; webhook_id: string; created_at: string }> {
    const row = await this.own(accountId, id);
    if (!row.enabled) throw new ServiceError('conflict', `Webhook ${id} is disabled; create a new one`);
    const at = this.clock.now();
    const eventId = await this.emit(accountId, 'webhook_test', { webhook_id: id, message: 'This is a test event from the gateway.' }, { webhookId: id });
    if (!eventId) throw new ServiceError('conflict', `Webhook ${id} is disabled; create a new one`);
    return { object: 'event', id: eventId, type: 'webhook_test', webhook_id: id, created_at: at.toISOString() };
  }

  async emit(accountId: string, type: WebhookEventType, data: Record<string, unknown>, opts: EmitOptions = {}): Promise<string | null> {
    if (!isWebhookEventType(type)) throw new Error(`unknown webhook event type ${type}`);
    const run = async (trx: Kysely<DB>): Promise<string | null> => {
      let q = trx.selectFrom('webhooks').select('id').where('account_id', '=', accountId).where('enabled', '=', true);
      q = opts.webhookId
        ? q.where('id', '=', opts.webhookId)
        : q.where((eb) => eb.or([eb('events', 'is', null), sql<boolean>`events @> ${JSON.stringify([type])}::jsonb`]));
      const hooks = await q.execute();
      if (hooks.length === 0) return null;
      const id = newId('evt_', 24);
      const now = this.clock.now();
      await trx.insertInto('webhook_events').values({ id, account_id: accountId, type, data: JSON.stringify(data), created_at: now }).execute();
      await trx
        .insertInto('webhook_deliveries')
        .values(hooks.map((h) => ({ id: newId('whd_', 24), event_id: id, webhook_id: h.id, status: 'pending' as const, next_attempt_at: now, claim_token: null, claimed_until: null, last_status_code: null, last_error: null, created_at: now, updated_at: now })))
        .execute();
      return id;
    };
    return opts.db ? run(opts.db) : this.db.transaction().execute(run);
  }
}

function view(r: Selectable<WebhooksTable>): WebhookView {
  return {
    id: r.id,
    object: 'webhook',
    url: r.url,
    events: r.events,
    description: r.description,
    enabled: r.enabled,
    created_at: r.created_at.toISOString(),
    disabled_at: r.disabled_at?.toISOString() ?? null,
  };
}

/** `next` is when the delivery's next attempt is due, for its latest attempt while it is still pending. */
function attemptView(r: Selectable<WebhookAttemptsTable>, next: Date | null): AttemptView {
  return {
    delivery_id: r.delivery_id,
    event_id: r.event_id,
    event_type: r.event_type,
    attempt: r.attempt,
    status_code: r.status_code,
    error: r.error,
    duration_ms: r.duration_ms,
    outcome: r.outcome,
    next_attempt_at: next?.toISOString() ?? null,
    at: r.at.toISOString(),
  };
}
