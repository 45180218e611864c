import { z } from 'zod';
import { flag, intWithDefault, jsonEnv } from './parse.ts';

/**
 * Subscription plans as JSON in SVC_PLANS, e.g.
 * `[{"id":"free","name":"Free","monthly_fee_micro_usd":0,"retention_days":7,"limits":{},"features":{}}, ...]`.
 * A plan `free` with fee 0 is required (unpaid and cancelled subscriptions drop to it). `limits` maps a
 * limit name to a number (null: unlimited); `features` maps a feature name to a flag. Unset: DEFAULT_PLANS.
 */
export interface PlanConfig {
  id: string;
  name: string;
  monthlyFeeMicroUsd: number;
  retentionDays: number;
  limits: Record<string, number | null>;
  features: Record<string, boolean>;
}

export const DEFAULT_PLANS: PlanConfig[] = [
  {
    id: 'free',
    name: 'Free',
    monthlyFeeMicroUsd: 0,
    retentionDays: 7,
    limits: { api_keys: 5, webhooks: 2, sandbox_sessions: 1, requests_per_minute: 60 },
    features: { webhooks: true, sandboxes: true, receipts: true, audit_packs: false, sla_reports: false, priority_support: false },
  },
  {
    id: 'pro',
    name: 'Pro',
    monthlyFeeMicroUsd: 20_000_000,
    retentionDays: 90,
    limits: { api_keys: 50, webhooks: 20, sandbox_sessions: 10, requests_per_minute: 600 },
    features: { webhooks: true, sandboxes: true, receipts: true, audit_packs: true, sla_reports: true, priority_support: false },
  },
  {
    id: 'team',
    name: 'Team',
    monthlyFeeMicroUsd: 100_000_000,
    retentionDays: 365,
    limits: { api_keys: null, webhooks: 100, sandbox_sessions: 50, requests_per_minute: 3000 },
    features: { webhooks: true, sandboxes: true, receipts: true, audit_packs: true, sla_reports: true, priority_support: true },
  },
];

const PlanEntry = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9_-]{0,31}$/, 'must be a lowercase id such as pro (letters, digits, _ or -; at most 32)'),
    name: z.string().min(1).max(64),
    monthly_fee_micro_usd: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    retention_days: z.number().int().min(1).max(36_500),
    limits: z.record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/), z.number().int().min(0).nullable()).default({}),
    features: z.record(z.string().regex(/^[a-z][a-z0-9_]{0,63}$/), z.boolean()).default({}),
  })
  .strict();

const PlanList = z
  .array(PlanEntry)
  .min(1)
  .max(32)
  .superRefine((list, ctx) => {
    const ids = new Set<string>();
    for (const [i, p] of list.entries()) {
      if (ids.has(p.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate plan id ${p.id}` });
      ids.add(p.id);
    }
    const free = list.find((p) => p.id === 'free');
    if (!free) ctx.addIssue({ code: 'custom', message: 'needs a plan with id "free" (cancelled and unpaid subscriptions drop to it)' });
    else if (free.monthly_fee_micro_usd !== 0) ctx.addIssue({ code: 'custom', message: 'plan "free" must have monthly_fee_micro_usd 0' });
  });

export const notificationsEnv = {
  SVC_PLANS: jsonEnv(PlanList, DEFAULT_PLANS as PlanConfig[], 'a JSON array of plans', (list) =>
    list.map((p) => ({ id: p.id, name: p.name, monthlyFeeMicroUsd: p.monthly_fee_micro_usd, retentionDays: p.retention_days, limits: p.limits, features: p.features })),
  ),
  /** The `balance_low` threshold of accounts that set none (PUT /v1/billing/alerts with null). Default $1. */
  SVC_BALANCE_LOW_DEFAULT_MICRO_USD: intWithDefault(1_000_000, 0),
  /** How long one webhook delivery attempt may take before it counts as failed. */
  SVC_WEBHOOK_TIMEOUT_SECONDS: intWithDefault(10, 1, 60),
  /**
   * Whether webhooks may target private, loopback, link-local and other non-public addresses. Off by
   * default: a webhook URL is chosen by a customer, and the gateway must not become their way into the
   * network it runs in (cloud metadata at 169.254.169.254, internal services). Turn on for local development.
   */
  SVC_WEBHOOK_ALLOW_PRIVATE: flag(false),
};

export interface WebhookConfig {
  timeoutMs: number;
  allowPrivate: boolean;
}
