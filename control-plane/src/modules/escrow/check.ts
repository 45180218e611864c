import { hashPersonalMessage, recoverPersonalMessage, toHex, type Hex } from '@svc/shared';

/**
 * The two preconditions of the reference escrow's `claim` (contracts/escrow/ReceiptEscrow.sol), computed the
 * way the contract computes them, byte for byte, so that `claimable` here and a claim on chain agree:
 * 1. the EIP-191 signature over the payload bytes recovers to the receipt signer (65 bytes, v in {0, 1, 27,
 *    28}, low s);
 * 2. the payload binds: one JSON object whose top-level job-id field occurs once with the job id as its JSON
 *    string value, and whose top-level `kind` is exactly the escrow's kind; an empty kind means the receipt
 *    declares none (no top-level `kind` member), never "any kind".
 * Pure: no clock, no storage. See docs/escrow.md.
 */

const enc = new TextEncoder();
const COLON = 0x3a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const KIND = enc.encode('kind');
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * True when a text is what the contract accepts as a job id, job-id field or kind: no character that JSON
 * escapes (`"`, `\`, U+0000-U+001F) and no lone surrogate, so its JSON string is the text between two quotes.
 */
export function plainText(s: string): boolean {
  if (LONE_SURROGATE.test(s)) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === QUOTE || c === BACKSLASH) return false;
  }
  return true;
}

/** What one pass over a payload found (the contract's `_members`). Offsets are just past a key's closing quote. */
export interface Members {
  object: boolean;
  jobCount: number;
  jobAt: number;
  kindCount: number;
  kindAt: number;
}

const sameBytes = (a: Uint8Array, from: number, to: number, b: Uint8Array) => {
  if (to - from !== b.length) return false;
  for (let i = 0; i < b.length; i++) if (a[from + i] !== b[i]) return false;
  return true;
};

/**
 * One pass over the payload bytes: whether they are one JSON object (first byte `{`, its matching `}` the last
 * byte, no string left open), and how often the top-level keys `jobField` and `kind` occur (nested objects and
 * arrays, and strings with their escapes, are skipped). Keys are compared as written.
 */
export function members(p: Uint8Array, jobField: Uint8Array): Members {
  const none: Members = { object: false, jobCount: 0, jobAt: 0, kindCount: 0, kindAt: 0 };
  const n = p.length;
  if (n < 2 || p[0] !== 0x7b) return none;
  const m = { ...none };
  let depth = 0;
  let inString = false;
  let escaped = false;
  let expectKey = false;
  let inKey = false;
  let keyStart = 0;
  for (let i = 0; i < n; i++) {
    const c = p[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === BACKSLASH) escaped = true;
      else if (c === QUOTE) {
        if (inKey) {
          if (sameBytes(p, keyStart, i, jobField)) {
            if (m.jobCount++ === 0) m.jobAt = i + 1;
          } else if (sameBytes(p, keyStart, i, KIND)) {
            if (m.kindCount++ === 0) m.kindAt = i + 1;
          }
        }
        inString = false;
        inKey = false;
      }
    } else if (c === QUOTE) {
      inString = true;
      if (depth === 1 && expectKey) {
        inKey = true;
        expectKey = false;
        keyStart = i + 1;
      }
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth === 1) expectKey = true;
    } else if (c === 0x7d || c === 0x5d) {
      if (depth === 0) return none;
      if (--depth === 0 && i !== n - 1) return none;
    } else if (c === 0x2c && depth === 1) {
      expectKey = true;
    }
  }
  m.object = depth === 0 && !inString;
  return m;
}

/** Whether the bytes at `offset` are `:` then the JSON string of `value` (the contract's `_valueAt`). */
export function valueAt(p: Uint8Array, offset: number, value: Uint8Array): boolean {
  if (offset + value.length + 3 > p.length) return false;
  if (p[offset] !== COLON || p[offset + 1] !== QUOTE || p[offset + 2 + value.length] !== QUOTE) return false;
  return sameBytes(p, offset + 2, offset + 2 + value.length, value);
}

/** The value after the key whose closing quote ends at `offset`, when it is a JSON string; else undefined. */
function stringAfter(p: Uint8Array, offset: number): { value: string; plain: boolean } | undefined {
  if (p[offset] !== COLON || p[offset + 1] !== QUOTE) return undefined;
  let plain = true;
  for (let i = offset + 2; i < p.length; i++) {
    if (p[i] === BACKSLASH) {
      plain = false;
      i++;
    } else if (p[i] === QUOTE) {
      try {
        return { value: JSON.parse(Buffer.from(p.subarray(offset + 1, i + 1)).toString('utf8')) as string, plain };
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

export type ReasonCode =
  | 'signature_invalid'
  | 'signature_mismatch'
  | 'payload_not_object'
  | 'job_field_missing'
  | 'job_field_repeated'
  | 'job_id_not_string'
  | 'job_id_not_plain'
  | 'job_id_mismatch'
  | 'kind_declared'
  | 'kind_missing'
  | 'kind_repeated'
  | 'kind_mismatch';

export interface Reason {
  code: ReasonCode;
  message: string;
}

/** The escrow's side of the binding: what the caller says the escrow expects. */
export interface EscrowTerms {
  /** The expected receipt kind; "" means the receipt must declare none. */
  kind: string;
  /** The top-level payload field that carries the job id. */
  jobField: string;
  /** The escrow's job id; null: the receipt's own value of `jobField` is the job id the claim names. */
  jobId: string | null;
}

export interface ClaimCheck {
  claimable: boolean;
  reasons: Reason[];
  signature: { ok: boolean; recovered_address: Hex | null; expected_signer: string };
  job: {
    ok: boolean;
    field: string;
    occurrences: number;
    /** The receipt's value of the field when it is a JSON string, else null. */
    value: string | null;
    /** Byte offset in the payload of the `:` after the first top-level occurrence of the key, or null. */
    offset: number | null;
  };
  kind: {
    ok: boolean;
    expected: string;
    /** The receipt's top-level kind when it declares one as a string, else null. */
    declared: string | null;
    occurrences: number;
    offset: number | null;
  };
  /** The job id a claim with this receipt names: the escrow's when given, else the receipt's; null when none can be named. */
  job_id: string | null;
}

/** Checks a receipt (its payload text exactly as signed, and its signature) against the escrow's terms. */
export function checkClaim(input: { payload: string; signature: string; signer: string; terms: EscrowTerms }): ClaimCheck {
  const { terms } = input;
  const bytes = enc.encode(input.payload);
  const reasons: Reason[] = [];
  const add = (code: ReasonCode, message: string) => reasons.push({ code, message });

  const recovered = recoverPersonalMessage(bytes, input.signature);
  const sigOk = recovered !== null && recovered.toLowerCase() === input.signer.toLowerCase();
  if (recovered === null) add('signature_invalid', 'The signature is malformed (not 65 bytes, a v other than 0, 1, 27 or 28, or a high s) or recovers no address');
  else if (!sigOk) add('signature_mismatch', `The signature recovers to ${recovered}, not to the receipt signer ${input.signer}`);

  const m = members(bytes, enc.encode(terms.jobField));
  let jobValue: string | null = null;
  let declared: string | null = null;
  let jobOk = false;
  let kindOk = false;
  if (!m.object) {
    add('payload_not_object', 'The payload is not one JSON object');
  } else {
    if (m.jobCount === 0) add('job_field_missing', `The payload has no top-level "${terms.jobField}" field`);
    else if (m.jobCount > 1) add('job_field_repeated', `The top-level "${terms.jobField}" field occurs ${m.jobCount} times`);
    else {
      const v = stringAfter(bytes, m.jobAt);
      jobValue = v?.value ?? null;
      if (!v) add('job_id_not_string', `The top-level "${terms.jobField}" value is not a JSON string`);
      else if (!v.plain) add('job_id_not_plain', `The top-level "${terms.jobField}" value has characters JSON escapes; no escrow can name it`);
      else if (terms.jobId !== null && !valueAt(bytes, m.jobAt, enc.encode(terms.jobId))) {
        add('job_id_mismatch', `The top-level "${terms.jobField}" is ${JSON.stringify(v.value)}, not the escrow's job id ${JSON.stringify(terms.jobId)}`);
      } else jobOk = true;
    }
    if (m.kindCount === 1) declared = stringAfter(bytes, m.kindAt)?.value ?? null;
    if (terms.kind === '') {
      if (m.kindCount !== 0) add('kind_declared', `The receipt declares kind ${declared === null ? 'a non-string value' : JSON.stringify(declared)}; the escrow expects a receipt that declares none`);
      else kindOk = true;
    } else if (m.kindCount === 0) add('kind_missing', `The receipt declares no kind; the escrow expects ${JSON.stringify(terms.kind)}`);
    else if (m.kindCount > 1) add('kind_repeated', `The top-level "kind" occurs ${m.kindCount} times`);
    else if (!valueAt(bytes, m.kindAt, enc.encode(terms.kind))) {
      add('kind_mismatch', `The receipt's kind is ${declared === null ? 'not a JSON string' : JSON.stringify(declared)}, not the escrow's ${JSON.stringify(terms.kind)}`);
    } else kindOk = true;
  }

  const jobId = terms.jobId ?? (jobOk ? jobValue : null);
  return {
    claimable: reasons.length === 0,
    reasons,
    signature: { ok: sigOk, recovered_address: recovered, expected_signer: input.signer },
    job: { ok: jobOk, field: terms.jobField, occurrences: m.jobCount, value: jobValue, offset: m.jobCount > 0 ? m.jobAt : null },
    kind: { ok: kindOk, expected: terms.kind, declared, occurrences: m.kindCount, offset: m.kindCount > 0 ? m.kindAt : null },
    job_id: jobId,
  };
}

/** The EIP-191 digest the contract recovers from, and the signature split as ecrecover takes it (null parts when malformed). */
export function signatureParts(payload: string, signature: string): { digest: Hex; v: number | null; r: Hex | null; s: Hex | null } {
  const digest = toHex(hashPersonalMessage(payload));
  if (!/^0x[0-9a-fA-F]{130}$/.test(signature)) return { digest, v: null, r: null, s: null };
  const v = parseInt(signature.slice(130, 132), 16);
  return { digest, v: v < 27 ? v + 27 : v, r: `0x${signature.slice(2, 66)}`, s: `0x${signature.slice(66, 130)}` };
}
