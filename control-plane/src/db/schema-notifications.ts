import type { Generated } from 'kysely';
import type { Json } from './schema-json.ts';

/** Webhook endpoints (webhooks module); the signing secret is sealed (AES-256-GCM, aad = webhook id), base64. */
export interface WebhooksTable {
  id: string;
  account_id: string;
  url: string;
  /** Event types delivered; null means every event. */
  events: Json<string[]> | null;
  description: string | null;
  secret_sealed: string;
  enabled: Generated<boolean>;
  created_at: Date;
  disabled_at: Date | null;
}

/** The outbox: one row per emitted event. */
export interface WebhookEventsTable {
  id: string;
  account_id: string;
  type: string;
  data: Json<Record<string, unknown>>;
  created_at: Date;
}

/** One row per (event, webhook); sent by the leader's loop, retried on a schedule. */
export interface WebhookDeliveriesTable {
  id: string;
  event_id: string;
  webhook_id: string;
  status: 'pending' | 'delivered' | 'failed' | 'canceled';
  attempts: Generated<number>;
  next_attempt_at: Date | null;
  claim_token: string | null;
  claimed_until: Date | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

/** Every delivery attempt (the deliveries route lists the last 50 of a webhook). */
export interface WebhookAttemptsTable {
  id: Generated<number>;
  delivery_id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status_code: number | null;
  error: string | null;
  duration_ms: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  at: Date;
}

/** The `balance_low` threshold of an account (alerts module); null means the deployment default. */
export interface BalanceAlertsTable {
  account_id: string;
  threshold_micro_usd: number | null;
  armed: boolean;
  fired_at: Date | null;
  updated_at: Date;
}

/** An account's plan (subscriptions module); no row means Free. */
export interface SubscriptionsTable {
  account_id: string;
  plan_id: string;
  period_start: Date;
  /** End of the paid period; null on Free. */
  period_end: Date | null;
  auto_renew: boolean;
  /** A plan change that takes effect at period_end (a switch to a plan that costs no more). */
  scheduled_plan_id: string | null;
  fee_micro_usd: Generated<number>;
  created_at: Date;
  updated_at: Date;
}
