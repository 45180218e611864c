/**
 * RFC 8785 JSON Canonicalization Scheme: object keys sorted by UTF-16 code units, no whitespace,
 * numbers in ECMAScript shortest form (JSON.stringify already produces that), strings as JSON.stringify.
 */
export function canonicalize(value: unknown): string {
  if (value === null || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error('canonical JSON cannot encode a non-finite number');
    return JSON.stringify(value);
  }
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') throw new Error('canonical JSON cannot encode a bigint; use a number or string');
  if (Array.isArray(value)) return `[${Array.from(value, (v) => canonicalize(v === undefined ? null : v)).join(',')}]`;
  if (typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    if (typeof (obj as { toJSON?: unknown }).toJSON === 'function') return canonicalize((obj as { toJSON(): unknown }).toJSON());
    const keys = Object.keys(obj).filter((k) => obj[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalize(obj[k])}`).join(',')}}`;
  }
  throw new Error(`canonical JSON cannot encode a ${typeof value}`);
}
