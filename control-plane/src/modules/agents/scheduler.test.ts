import { describe, expect, it } from 'vitest';
import { ServiceError } from '@svc/shared';
import { checkSchedule, nextRunOf } from './scheduler.ts';

const at = (iso: string) => new Date(iso);

describe('agent schedules', () => {
  it('takes cron expressions in UTC that fire at most once a minute, and answers the next run', () => {
    expect(checkSchedule('*/5 * * * *', at('2026-11-27T10:02:30Z'))).toEqual(at('2026-11-27T10:05:00Z'));
    expect(checkSchedule('@hourly', at('2026-11-27T10:02:30Z'))).toEqual(at('2026-11-27T11:00:00Z'));
    expect(checkSchedule('0 * * * * *', at('2026-11-27T10:02:30Z'))).toEqual(at('2026-11-27T10:03:00Z')); // seconds field, once a minute
    expect(checkSchedule('0 9 * * 1', at('2026-11-27T10:00:00Z'))).toEqual(at('2026-11-30T09:00:00Z')); // Mondays 09:00 UTC
  });

  it('refuses, naming schedule, what is not cron or fires more often than every 60 s', () => {
    for (const expr of ['*/10 * * * * *', '* * * * * *', '0,30 * * * * *', 'not cron', '61 * * * *']) {
      let err: unknown;
      try {
        checkSchedule(expr, at('2026-11-27T10:00:00Z'));
      } catch (e) {
        err = e;
      }
      expect(err, expr).toBeInstanceOf(ServiceError);
      expect((err as ServiceError).extra.param, expr).toBe('schedule');
    }
  });

  it('counts the next run from now, so runs missed while no leader ran are not replayed', () => {
    // Due at 10:05, looked at only at 11:17: the next run is 11:20, not 10:10.
    expect(nextRunOf('*/5 * * * *', at('2026-11-27T11:17:00Z'))).toEqual(at('2026-11-27T11:20:00Z'));
  });
});
