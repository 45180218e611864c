/**
 * Durable state: the limits and the syntax of keys, namespaces and values. Pure functions, shared by the
 * route schemas (which name the field of a refusal) and the service.
 */

/** Keys an account holds across all its namespaces (spec document 3). */
export const STATE_KEYS_PER_ACCOUNT = 10_000;
/** Keys one listing returns; a namespace holding more is listed truncated (spec document 3). */
export const STATE_LIST_CAP = 1_000;
/** Bytes of a value's canonical JSON (RFC 8785, UTF-8). */
export const STATE_VALUE_MAX_BYTES = 64 * 1024;
/** Bytes of a key, UTF-8 encoded: under the router's 500-character limit on a path parameter, whatever the script. */
export const STATE_KEY_MAX_BYTES = 256;
export const STATE_NAMESPACE_MAX = 64;
export const DEFAULT_NAMESPACE = 'default';
/** A request body may carry the value with whitespace or escapes that canonical JSON drops. */
export const STATE_BODY_LIMIT = 4 * STATE_VALUE_MAX_BYTES;

export const NAMESPACE_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** C0 controls, DEL and C1 controls. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** Why `key` is not a valid state key, or null when it is. */
export function keyProblem(key: string): string | null {
  if (key.length === 0) return 'must not be empty';
  if (/\p{Surrogate}/u.test(key)) return 'must be well-formed Unicode (no lone surrogate)';
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > STATE_KEY_MAX_BYTES) return `must be at most ${STATE_KEY_MAX_BYTES} bytes once UTF-8 encoded (this one is ${bytes})`;
  if (key.includes('/')) return 'must not contain "/" (a key is one path segment; it is sent percent-encoded)';
  if (CONTROL.test(key)) return 'must not contain control characters (U+0000 to U+001F, U+007F to U+009F)';
  if (key === '.' || key === '..') return 'must not be "." or "..": URL parsers resolve them as path steps';
  return null;
}

/** Why `ns` is not a valid namespace, or null when it is. */
export function namespaceProblem(ns: string): string | null {
  return NAMESPACE_PATTERN.test(ns) ? null : `must be 1 to ${STATE_NAMESPACE_MAX} characters of A-Z, a-z, 0-9, ".", "_" and "-"`;
}

/**
 * Where a parsed JSON value holds a number that is not finite (a literal such as 1e400 parses to Infinity,
 * which JSON cannot write back), as a path below `value`; null when there is none. Depth is bounded by the
 * body parser (64 levels).
 */
export function nonFinitePath(v: unknown, path = ''): string | null {
  if (typeof v === 'number') return Number.isFinite(v) ? null : path;
  if (typeof v !== 'object' || v === null) return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const p = nonFinitePath(v[i], `${path}[${i}]`);
      if (p !== null) return p;
    }
    return null;
  }
  for (const [k, x] of Object.entries(v)) {
    const p = nonFinitePath(x, `${path}.${k}`);
    if (p !== null) return p;
  }
  return null;
}
