import { z } from 'zod';

/**
 * Request field types every route's schema shares, so a rule about a kind of value holds on every route.
 *
 * Date-times: what the API accepts is what both databases store and what reads back unchanged. Postgres
 * timestamptz (and the embedded PGlite) refuse year 0 and years past 294276, and JavaScript writes years past
 * 9999 as `+010000-...`, which no ISO 8601 / RFC 3339 reader without expanded years accepts back. Nothing this
 * gateway records predates the Unix epoch, so the accepted window is 1970-01-01T00:00:00Z to
 * 9999-12-31T23:59:59.999Z: every instant in it is stored and returned in the plain four-digit form.
 */
export const EARLIEST_MS = Date.UTC(1970, 0, 1);
export const LATEST_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

/** A date (`2026-01-31`) or a date-time (`2026-01-31T12:00:00Z`, offset optional; without one, server time). */
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/** An ISO 8601 date-time within [EARLIEST_MS, LATEST_MS]; `base` narrows the format further (e.g. z.iso.datetime()). */
export function dateTime(base: z.ZodString | z.ZodISODateTime = z.string().max(40)) {
  return base.superRefine((v, ctx) => {
    const ms = ISO_8601.test(v) ? Date.parse(v) : NaN;
    if (Number.isNaN(ms)) ctx.addIssue({ code: 'custom', message: 'not an ISO 8601 date-time' });
    else if (ms < EARLIEST_MS || ms > LATEST_MS) ctx.addIssue({ code: 'custom', message: 'out of range: give a date-time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z' });
  });
}

/**
 * A string that reaches a program, a process or a file system (source code, an argv element, an environment
 * value, a path), none of which can carry a NUL character: refused here, naming the field.
 */
export function withoutNul(s: z.ZodString) {
  return s.refine((v) => !v.includes('\0'), 'contains a NUL character (\\u0000), which this field does not accept');
}
