/**
 * RFC 8785 JSON Canonicalization Scheme: object keys sorted by UTF-16 code units, no whitespace,
 * numbers in ECMAScript shortest form (JSON.stringify already produces that), strings as JSON.stringify.
 *
 * Every receipt goes through here. A document that is plain data whose object keys are already in that
 * order at every level (receipts are built so) is written by JSON.stringify, which then writes exactly these
 * bytes, at about a third of the cost. Anything else is built by appending to one string per level.
 */
export function canonicalize(value: unknown): string {
  return inCanonicalOrder(value) ? JSON.stringify(value) : build(value);
}

/**
 * Whether JSON.stringify writes `value` canonically: strings, booleans, null, finite numbers, arrays, and
 * plain objects (prototype Object.prototype or null: no toJSON, no boxed primitives) whose own keys are in
 * strictly increasing code-unit order, all the way down. Undefined members are dropped and undefined array
 * elements written as null by both. Anything that `build` refuses (a function, a symbol, a bigint, a
 * non-finite number) answers false, so it is refused there.
 */
function inCanonicalOrder(value: unknown): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object': {
      if (value === null) return true;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const v: unknown = value[i];
          if (v !== undefined && !inCanonicalOrder(v)) return false;
        }
        return true;
      }
      const proto: unknown = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      const obj = value as Record<string, unknown>;
      const keys = Object.keys(obj);
      for (let i = 0; i < keys.length; i++) {
        if (i > 0 && !(keys[i - 1]! < keys[i]!)) return false; // `<` on strings compares UTF-16 code units
        const v = obj[keys[i]!];
        if (v !== undefined && !inCanonicalOrder(v)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

function build(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new Error('canonical JSON cannot encode a non-finite number');
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      throw new Error('canonical JSON cannot encode a bigint; use a number or string');
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let s = '[';
        for (let i = 0; i < value.length; i++) {
          const v: unknown = value[i]; // a hole or undefined renders as null, as JSON.stringify does
          s += (i === 0 ? '' : ',') + (v === undefined ? 'null' : build(v));
        }
        return `${s}]`;
      }
      const obj = value as Record<string, unknown>;
      if (typeof (obj as { toJSON?: unknown }).toJSON === 'function') return build((obj as { toJSON(): unknown }).toJSON());
      const keys = Object.keys(obj).sort();
      let s = '{';
      let first = true;
      for (const k of keys) {
        const v = obj[k];
        if (v === undefined) continue; // dropped, as JSON.stringify does
        s += `${first ? '' : ','}${JSON.stringify(k)}:${build(v)}`;
        first = false;
      }
      return `${s}}`;
    }
    default:
      throw new Error(`canonical JSON cannot encode a ${typeof value}`);
  }
}
