import type { PlanConfig } from '../../config.ts';

export const FREE_PLAN = 'free';

export interface PlanView {
  id: string;
  object: 'plan';
  name: string;
  monthly_fee_micro_usd: number;
  retention_days: number;
  limits: Record<string, number | null>;
  features: Record<string, boolean>;
}

export const planView = (p: PlanConfig): PlanView => ({
  id: p.id,
  object: 'plan',
  name: p.name,
  monthly_fee_micro_usd: p.monthlyFeeMicroUsd,
  retention_days: p.retentionDays,
  limits: p.limits,
  features: p.features,
});

/** One calendar month later (UTC), clamped to the last day of a shorter month: Jan 31 -> Feb 28/29. */
export function addMonth(d: Date): Date {
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const last = new Date(Date.UTC(y, m + 2, 0)).getUTCDate();
  const r = new Date(d.getTime());
  r.setUTCFullYear(y, m + 1, Math.min(d.getUTCDate(), last));
  return r;
}

/** The ledger ref of a plan's fee for one period: at most one debit per (account, plan, period start). */
export const feeRef = (accountId: string, planId: string, periodStart: Date) => `subscription:${accountId}:${planId}:${periodStart.toISOString()}`;
