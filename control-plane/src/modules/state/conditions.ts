import { ServiceError, invalid } from '@svc/shared';

/**
 * Conditional writes on state values (RFC 9110 section 13). A value's entity tag is its version, written
 * `"<version>"`; If-Match takes that form or the bare number, or `*` (the value must exist). If-None-Match on
 * a write takes `*` only (create, never replace). Weak tags and lists are refused: a write compares strongly,
 * against one version.
 */
export interface Conditions {
  /** `*` or the version the write expects; undefined: no If-Match. */
  ifMatch?: '*' | number;
  /** true: If-None-Match: * (the key must not exist). */
  ifNoneMatch?: true;
}

/** A value's entity tag, as sent in the ETag header. */
export const etag = (version: number) => `"${version}"`;

const VERSION = /^(?:"([1-9][0-9]{0,14})"|([1-9][0-9]{0,14}))$/;

/** Reads the condition headers of a write; a malformed one is a 400 naming the header. */
export function parseConditions(h: { 'if-match'?: string; 'if-none-match'?: string }, allowNoneMatch: boolean): Conditions {
  const out: Conditions = {};
  const ifMatch = h['if-match']?.trim();
  if (ifMatch !== undefined) {
    if (ifMatch === '*') out.ifMatch = '*';
    else {
      const m = VERSION.exec(ifMatch);
      if (!m) throw invalid(`If-Match: expected one version, as the ETag gives it ("3") or bare (3), or *; got ${JSON.stringify(ifMatch.slice(0, 40))}`, 'if-match');
      out.ifMatch = Number(m[1] ?? m[2]);
    }
  }
  const ifNoneMatch = h['if-none-match']?.trim();
  if (ifNoneMatch !== undefined) {
    if (!allowNoneMatch) throw invalid('If-None-Match: not taken on this route (send If-Match to delete only a given version)', 'if-none-match');
    if (ifNoneMatch !== '*') throw invalid(`If-None-Match: only * is taken on a write (create the key only if it is absent); got ${JSON.stringify(ifNoneMatch.slice(0, 40))}`, 'if-none-match');
    if (out.ifMatch !== undefined) throw invalid('If-Match and If-None-Match: send one of them, not both', 'if-none-match');
    out.ifNoneMatch = true;
  }
  return out;
}

/** 412 for a write whose condition does not hold against the current version (undefined: the key is absent). */
export function checkConditions(c: Conditions, current: number | undefined): void {
  const at = current === undefined ? 'the key does not exist' : `the current version is ${current}`;
  if (c.ifMatch !== undefined && (current === undefined || (c.ifMatch !== '*' && c.ifMatch !== current))) {
    const wanted = c.ifMatch === '*' ? 'If-Match: * asks for an existing value' : `If-Match names version ${c.ifMatch}`;
    throw new ServiceError('precondition_failed', `${wanted}, but ${at}; nothing was written`, { param: 'if-match', current_version: current ?? null });
  }
  if (c.ifNoneMatch && current !== undefined) {
    throw new ServiceError('precondition_failed', `If-None-Match: * creates only an absent key, but ${at}; nothing was written`, { param: 'if-none-match', current_version: current });
  }
}
