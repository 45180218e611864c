/**
 * The one reader of a caller's date-times, for every field, query parameter and command-line option that
 * takes one: each part is checked against the calendar and the clock, so `2030-02-30` or `T25:00` is refused
 * rather than carried into the next month or day (as `Date.parse` does).
 *
 * Accepted: a date (`2026-01-31`, midnight UTC) or a date-time (`2026-01-31T12:00:00Z`; `T` or a space; seconds
 * and up to 9 fraction digits optional, milliseconds kept; an offset `Z`, `+05:30`, `+0530` or `+05`, and without
 * one the host's local time).
 *
 * The range is what the gateway's databases store and read back unchanged: Postgres timestamptz (and the
 * embedded PGlite) refuse year 0 and years past 294276, and JavaScript writes years past 9999 as `+010000-...`,
 * which no ISO 8601 / RFC 3339 reader without expanded years accepts back. Nothing the gateway records predates
 * the Unix epoch, so the window is 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z: every instant in it is
 * stored and returned in the plain four-digit form.
 */
export const EARLIEST_MS = Date.UTC(1970, 0, 1);
export const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

const FORMAT = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

export type DateTimeReading = { ok: true; date: Date } | { ok: false; reason: string };

const refused = (reason: string): DateTimeReading => ({ ok: false, reason });

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** The offset's minutes east of UTC, or a reason it is not one. */
function offsetMinutes(text: string): number | string {
  if (/^z$/i.test(text)) return 0;
  const [hh, mm = '00'] = [text.slice(1, 3), text.slice(3).replace(':', '')];
  if (Number(hh) > 23 || Number(mm) > 59) return `the offset ${text} is not one (hours 00-23, minutes 00-59)`;
  return (text[0] === '-' ? -1 : 1) * (Number(hh) * 60 + Number(mm));
}

/**
 * The instant a caller's date-time names, or why it names none (wrong form, no such day or time, out of range).
 * `offset: 'required'`: only a date-time with its offset (RFC 3339), where the host's time zone must not decide.
 */
export function readDateTime(text: string, opts: { offset?: 'required' } = {}): DateTimeReading {
  const m = FORMAT.exec(text);
  if (!m) return refused('not an ISO 8601 date-time (e.g. 2026-01-31T12:00:00Z)');
  const [, y, mo, d, h, mi, s, frac, off] = m as unknown as [string, string, string, string, string?, string?, string?, string?, string?];
  if (opts.offset === 'required' && off === undefined) return refused('not an RFC 3339 date-time: give the time and its offset (e.g. 2026-01-31T12:00:00Z)');
  const [year, month, day] = [Number(y), Number(mo), Number(d)];
  if (month < 1 || month > 12) return refused(`not a calendar date: there is no month ${mo}`);
  const days = daysInMonth(year, month);
  if (day < 1 || day > days) return refused(`not a calendar date: ${MONTHS[month - 1]} ${year} has days 01 to ${days}, not ${d}`);
  const [hour, minute, second] = [Number(h ?? 0), Number(mi ?? 0), Number(s ?? 0)];
  if (hour > 23 || minute > 59 || second > 59) return refused(`not a time of day: ${h}:${mi}${s === undefined ? '' : `:${s}`} (hours 00-23, minutes and seconds 00-59)`);
  const ms = frac === undefined ? 0 : Number(frac.padEnd(3, '0').slice(0, 3));
  const at = new Date(0);
  if (h !== undefined && off === undefined) {
    at.setFullYear(year, month - 1, day); // the setters, not Date.UTC or new Date(y, ...), which read years 0-99 as 1900-1999
    at.setHours(hour, minute, second, ms);
  } else {
    const offset = off === undefined ? 0 : offsetMinutes(off);
    if (typeof offset === 'string') return refused(`not an ISO 8601 date-time: ${offset}`);
    at.setUTCFullYear(year, month - 1, day);
    at.setUTCHours(hour, minute - offset, second, ms);
  }
  const t = at.getTime();
  if (!(t >= EARLIEST_MS && t <= LATEST_MS)) return refused('out of range: give a date-time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z');
  return { ok: true, date: at };
}
