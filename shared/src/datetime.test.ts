import { describe, expect, it } from 'vitest';
import { readDateTime } from './datetime.ts';

const instant = (v: string) => {
  const r = readDateTime(v);
  return r.ok ? r.date.toISOString() : `refused: ${r.reason}`;
};

describe('readDateTime', () => {
  it('refuses a day the month does not have, where Date.parse moves it into the next month', () => {
    for (const v of ['2030-02-30T00:00:00Z', '2031-04-31T12:00:00Z', '2026-02-29', '2100-02-29T00:00:00Z', '2030-06-31T00:00:00+02:00', '2030-01-32T00:00:00Z', '2030-01-00T00:00:00Z']) {
      expect(instant(v), v).toMatch(/^refused: not a calendar date/);
    }
    expect(new Date(Date.parse('2031-04-31T12:00:00Z')).toISOString()).toBe('2031-05-01T12:00:00.000Z');
    expect(instant('2031-04-31T12:00:00Z')).toBe('refused: not a calendar date: April 2031 has days 01 to 30, not 31');
  });

  it('refuses a month, hour, minute, second or offset out of its range', () => {
    for (const v of ['2030-13-01', '2030-00-10', '2030-01-01T24:00:00Z', '2030-01-01T23:60:00Z', '2030-01-01T23:59:60Z', '2030-01-01T10:00:00+24:00', '2030-01-01T10:00:00+05:60']) {
      expect(instant(v), v).toMatch(/^refused: /);
    }
  });

  it('reads leap days, offsets, fractions and date-only values to the instant they name', () => {
    expect(instant('2028-02-29T00:00:00Z')).toBe('2028-02-29T00:00:00.000Z');
    expect(instant('2000-02-29')).toBe('2000-02-29T00:00:00.000Z');
    expect(instant('2030-01-31T23:30:00-01:00')).toBe('2030-02-01T00:30:00.000Z');
    expect(instant('2030-01-01T05:30:00+0530')).toBe('2030-01-01T00:00:00.000Z');
    expect(instant('2030-01-01T12:00:00.123456789Z')).toBe('2030-01-01T12:00:00.123Z');
    expect(instant('2030-01-01 12:00z')).toBe('2030-01-01T12:00:00.000Z');
    expect(instant('2030-01-01T12:00:00')).toBe(new Date(2030, 0, 1, 12).toISOString()); // no offset: the host's local time
  });

  it('keeps the stored range, 1970 to 9999, and the one form', () => {
    expect(instant('1970-01-01T00:00:00Z')).toBe('1970-01-01T00:00:00.000Z');
    expect(instant('9999-12-31T23:59:59.999Z')).toBe('9999-12-31T23:59:59.999Z');
    for (const v of ['1969-12-31T23:59:59Z', '9999-12-31T23:00:00-05:00', '0050-01-01', '+275760-09-13T00:00:00.000Z', 'Jan 1 2030', '2030-1-1', '']) {
      expect(instant(v), v).toMatch(/^refused: /);
    }
  });
});
