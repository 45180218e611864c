import { ATTESTATION_EVENTS } from '../attestations/event-types.ts'; // attestations
/**
 * Every webhook event type the gateway emits, in one place. A webhook subscribes to some of them (or to
 * all, with `events` omitted); a feature that emits a new type adds it here. The payload of every
 * delivery is `{id, type, timestamp, account_id, data}`; `data` per type is described below.
 */
export const WEBHOOK_EVENTS = {
  webhook_test: 'A synthetic event fired by POST /v1/webhooks/:id/test; data: {webhook_id, message}. Always sent to that webhook, whatever its event filter.',
  balance_low: 'The credit balance crossed from at or above the alert threshold to below it (PUT /v1/billing/alerts); data: {balance_micro_usd, threshold_micro_usd}. Fires once per crossing; re-arms when the balance is back at or above the threshold.',
  subscription_renewed: 'A paid plan renewed at period end and its monthly fee was debited; data: {plan, fee_micro_usd, period_start, period_end, balance_micro_usd}.',
  subscription_renewal_failed: 'A renewal could not be paid from prepaid credit; the account dropped to Free; data: {plan, fee_micro_usd, balance_micro_usd, spendable_micro_usd, period_end}.',
  subscription_ended: 'A cancelled subscription (auto-renew off) reached its period end; the account dropped to Free; data: {plan, period_end}.',
  eval_drift_detected: 'A drift monitor\'s run fell under its threshold or more than its drop tolerance below its baseline, after a run that did not (once per drift; re-arms after a run within bounds); data: {monitor_id, eval_id, run_id, measure, measured_rate, pass_rate, pass_at_n, pass_hat_n, repeat, baseline_rate, threshold, drop_tolerance, reasons, failure_streak, regressed_cases, finished_at}.', // quality
  ...ATTESTATION_EVENTS, // attestations: attestation.verified, attestation.discrepancy, attestation.unavailable, attestation.changed
} as const;

export type WebhookEventType = keyof typeof WEBHOOK_EVENTS;
export const WEBHOOK_EVENT_TYPES = Object.keys(WEBHOOK_EVENTS) as [WebhookEventType, ...WebhookEventType[]];

export const isWebhookEventType = (t: string): t is WebhookEventType => Object.hasOwn(WEBHOOK_EVENTS, t);
