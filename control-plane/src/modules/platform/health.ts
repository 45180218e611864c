import { sql, type Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { Readiness } from './readiness.ts';

const WINDOWS = [
  ['24h', 24 * 3600],
  ['7d', 7 * 24 * 3600],
  ['30d', 30 * 24 * 3600],
] as const;

/**
 * Recorded health: the leader writes one sample per interval (database reachable and its latency);
 * uptime over a window is the share of expected samples that were recorded healthy, so time when no
 * process was up counts as down.
 */
export class HealthService {
  readonly startedAt: Date;
  /** What `/readyz` waits for beyond the process answering. */
  readonly readiness = new Readiness();
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly processId: string,
    private readonly sampleSeconds: number,
  ) {
    this.startedAt = clock.now();
  }

  async probe(): Promise<{ ok: boolean; db_ms: number }> {
    const t0 = performance.now();
    try {
      await sql`select 1`.execute(this.db);
      return { ok: true, db_ms: Math.round(performance.now() - t0) };
    } catch {
      return { ok: false, db_ms: Math.round(performance.now() - t0) };
    }
  }

  async recordSample(): Promise<void> {
    const p = await this.probe();
    await this.db.insertInto('health_samples').values({ at: this.clock.now(), ok: p.ok, db_ms: p.db_ms, process_id: this.processId }).execute();
    await this.db.deleteFrom('health_samples').where('at', '<', new Date(this.clock.now().getTime() - 35 * 86400_000)).execute();
  }

  /** Uptime per window from recorded samples; samples are bucketed per interval so several processes count once. */
  async uptime(windowSeconds: number, until: Date = this.clock.now()) {
    const from = new Date(until.getTime() - windowSeconds * 1000);
    const bucket = this.sampleSeconds;
    const r = await sql<{ healthy: number; recorded: number; first: Date | null }>`
      select count(*) filter (where ok)::int as healthy, count(*)::int as recorded, min(first_at) as first from (
        select to_timestamp(floor(extract(epoch from at) / ${bucket}) * ${bucket}) as b, bool_or(ok) as ok, min(at) as first_at
        from health_samples where at > ${from} and at <= ${until} group by 1
      ) s`.execute(this.db);
    const row = r.rows[0] ?? { healthy: 0, recorded: 0, first: null };
    // Expected samples: one per interval from the first sample inside the window (a new deployment is not
    // "down" before it existed) up to `until`, counting only samples already due, whatever the phase of the
    // first sample within its interval.
    const first = row.first ? new Date(row.first) : null;
    const due = first ? Math.floor((until.getTime() - first.getTime()) / 1000 / bucket) + 1 : 0;
    const expected = first ? Math.max(row.recorded, due) : 0;
    return {
      window_seconds: windowSeconds,
      samples_expected: expected,
      samples_healthy: row.healthy,
      uptime_ratio: expected === 0 ? null : Number((row.healthy / expected).toFixed(6)),
    };
  }

  async status() {
    const now = this.clock.now();
    const probe = await this.probe();
    const uptime: Record<string, Awaited<ReturnType<HealthService['uptime']>>> = {};
    for (const [name, secs] of WINDOWS) uptime[name] = await this.uptime(secs, now);
    const last = await this.db.selectFrom('health_samples').select(['at', 'ok']).orderBy('at', 'desc').limit(1).executeTakeFirst();
    return {
      status: probe.ok ? ('ok' as const) : ('degraded' as const),
      now: now.toISOString(),
      process: { started_at: this.startedAt.toISOString(), uptime_seconds: Math.floor((now.getTime() - this.startedAt.getTime()) / 1000) },
      database: { ok: probe.ok, latency_ms: probe.db_ms },
      sample_interval_seconds: this.sampleSeconds,
      last_sample: last ? { at: last.at.toISOString(), ok: last.ok } : null,
      uptime,
    };
  }
}
