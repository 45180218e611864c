import { z } from 'zod';
import { invalid, readDateTime } from '@svc/shared';

/**
 * Request field types every route's schema shares, so a rule about a kind of value holds on every route.
 *
 * Date-times are read by one parser (readDateTime in @svc/shared): a date or date-time that names a real
 * instant from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, what both databases store and read back
 * unchanged. A day or time that does not exist (February 30, 25:00) is refused, never moved to another.
 */

type DateTimeRules = Parameters<typeof readDateTime>[1];

/** A date-time field, by readDateTime's rules (`offset: 'required'`: RFC 3339, with its offset). */
export function dateTime(rules: DateTimeRules = {}) {
  const s = z
    .string()
    .max(40)
    .superRefine((v, ctx) => {
      const r = readDateTime(v, rules);
      if (!r.ok) ctx.addIssue({ code: 'custom', message: r.reason });
    });
  return rules.offset === 'required' ? s.meta({ format: 'date-time' }) : s;
}

/** The instant of a caller's date-time (a field checked by dateTime(), or one read elsewhere); a 400 naming `field` otherwise. */
export function instantOf(v: string, field: string, rules: DateTimeRules = {}): Date {
  const r = readDateTime(v, rules);
  if (!r.ok) throw invalid(`${field}: ${r.reason}`, field);
  return r.date;
}

/**
 * A string that reaches a program, a process or a file system (source code, an argv element, an environment
 * value, a path), none of which can carry a NUL character: refused here, naming the field.
 */
export function withoutNul(s: z.ZodString) {
  return s.refine((v) => !v.includes('\0'), 'contains a NUL character (\\u0000), which this field does not accept');
}

/** The status a schema issue carries when it is not a 400: a value over its byte limit is a 413. */
export const ISSUE_STATUS = 'status';

/**
 * Text limited in UTF-8 bytes (a program, a message): past the limit it is a 413 `payload_too_large` naming the
 * field, however many characters it takes to get there (a character count would pass 4-byte characters the
 * byte limit refuses, and refuse with a 400 what the byte limit answers 413).
 */
export function utf8Text(maxBytes: number, s: z.ZodString = z.string()) {
  return s.superRefine((v, ctx) => {
    if (v.length * 3 <= maxBytes) return; // a UTF-16 code unit is at most 3 UTF-8 bytes
    const bytes = Buffer.byteLength(v, 'utf8');
    if (bytes > maxBytes) ctx.addIssue({ code: 'custom', message: `${bytes} bytes of UTF-8; at most ${maxBytes}`, params: { [ISSUE_STATUS]: 413, limit_bytes: maxBytes } });
  });
}
