import { invalid } from '@svc/shared';
import type { HealthService } from '../platform/health.ts';
import { instantOf } from '../../http/fields.ts';

const DAY_MS = 86_400_000;
export const SLA_DEFAULT_DAYS = 30;
export const SLA_MAX_DAYS = 366;

/** Resolves the requested window: defaults, order, span, and a `to` in the future clamped to now. */
export function slaWindow(input: { from?: string | undefined; to?: string | undefined }, now: Date) {
  const requestedTo = input.to ? instantOf(input.to, 'to', { offset: 'required' }) : now;
  const from = input.from ? instantOf(input.from, 'from', { offset: 'required' }) : new Date(requestedTo.getTime() - SLA_DEFAULT_DAYS * DAY_MS);
  if (requestedTo.getTime() <= from.getTime()) throw invalid('to must be after from', 'to');
  if (requestedTo.getTime() - from.getTime() > SLA_MAX_DAYS * DAY_MS) throw invalid(`the window spans at most ${SLA_MAX_DAYS} days`, 'from');
  if (from.getTime() >= now.getTime()) throw invalid('from must be in the past', 'from');
  const clamped = requestedTo.getTime() > now.getTime();
  const to = clamped ? now : requestedTo;
  return { from, to, clamped };
}

export const SLA_METHOD =
  'The leader records one health sample per interval (database reachable). Uptime is the share of expected intervals recorded healthy, ' +
  'counted from the first sample inside the window; intervals with no sample (no process up) count as down.';

/** The SLA report document (signed by the caller) from recorded uptime telemetry. */
export async function slaDocument(health: HealthService, accountId: string, input: { from?: string | undefined; to?: string | undefined }, now: Date) {
  const w = slaWindow(input, now);
  const seconds = (w.to.getTime() - w.from.getTime()) / 1000;
  const u = await health.uptime(seconds, w.to);
  const status = await health.status();
  return {
    type: 'svc.sla_report' as const,
    version: 1 as const,
    account_id: accountId,
    window: { from: w.from.toISOString(), to: w.to.toISOString(), seconds, clamped_to_now: w.clamped },
    sample_interval_seconds: status.sample_interval_seconds,
    samples_expected: u.samples_expected,
    samples_healthy: u.samples_healthy,
    uptime_ratio: u.uptime_ratio,
    method: SLA_METHOD,
    current: {
      status: status.status,
      database_ok: status.database.ok,
      last_sample_at: status.last_sample?.at ?? null,
      last_sample_ok: status.last_sample?.ok ?? null,
    },
    generated_at: now.toISOString(),
  };
}
