import { canonicalize } from './crypto/canonical-json.ts';
import { recoverPersonalMessage, signPersonalMessage } from './crypto/eip191.ts';
import type { Hex } from './crypto/hex.ts';
import { sha256Hex } from './hash.ts';

/**
 * What a call's receipt cites beside the call itself, inside the signed payload: the ordered root of a
 * source set the caller named (and the set's id). Absent from receipts that cite nothing.
 */
export interface ReceiptContext {
  root: string;
  source_set_id: string;
}

/** The policy a key carries, stamped on every receipt of the key (policies module): its id and the sha256 of its canonical JSON. */
export interface ReceiptPolicy {
  id: string;
  sha256: string;
}

/** One guardrail finding: how many matches of a category a rule saw in one direction, and what was done; never the matched text. */
export interface ReceiptGuardrailFinding {
  action: string;
  category: string;
  count: number;
  decision: string;
  direction: 'input' | 'output';
  rule: string;
  severity: string;
}

/** The guardrail findings of a call whose key's policy names rule sets, under the deployment's mode. */
export interface ReceiptGuardrails {
  findings: ReceiptGuardrailFinding[];
  mode: 'enforce' | 'monitor';
}

/** The engine build a call of `engine/<slug>` was served by (engine module): its id, slug, version and spec digest. */
export interface ReceiptEngine {
  build_id: string;
  slug: string;
  spec_sha256: string;
  version: number;
}

/**
 * A receipt: metadata of one billable response, never its content. Its RFC 8785 canonical JSON is
 * signed with EIP-191 (personal_sign) by the gateway's secp256k1 key; anyone verifies with any
 * Ethereum library by recovering the signer from the canonical bytes.
 */
export interface ReceiptPayload {
  v: 1;
  id: string; // the request id; receipts are fetched by it
  kind: string;
  account_id: string;
  key_id: string | null;
  usage_event_id: string;
  route: string;
  model: string | null;
  units: Record<string, number | string>;
  cost_micro_usd: number;
  created_at: string;
  run: { id: string; seq: number; prev: string | null } | null;
  policy: ReceiptPolicy | null;
  context?: ReceiptContext;
  guardrails?: ReceiptGuardrails;
  /** The engine build that served a call of `engine/<slug>` (engine builds). */
  engine?: ReceiptEngine;
  signer: string;
  [extra: string]: unknown;
}

export interface SignedReceipt {
  payload: ReceiptPayload;
  canonical: string;
  hash: Hex; // 0x sha256 of the canonical bytes; run chains link these
  signature: Hex;
}

/**
 * The payload with its signer, placed in code-unit order among the payload's keys: a payload written in
 * canonical order stays so (canonicalize then takes its JSON.stringify path). Any payload signs the same.
 * A payload that names this signer already is returned as it is.
 */
export function withSigner(payload: Omit<ReceiptPayload, 'signer'>, signer: string): ReceiptPayload {
  if ((payload as Partial<ReceiptPayload>).signer === signer) return payload as ReceiptPayload;
  const out: Record<string, unknown> = {};
  let placed = false;
  for (const k of Object.keys(payload)) {
    if (k === 'signer') continue;
    if (!placed && k > 'signer') {
      out.signer = signer;
      placed = true;
    }
    out[k] = payload[k];
  }
  if (!placed) out.signer = signer;
  return out as ReceiptPayload;
}

export function receiptHash(canonical: string): Hex {
  return `0x${sha256Hex(canonical)}`;
}

/** A receipt signed by `sign` (EIP-191 personal_sign of the canonical text), or by the private key given. */
export function signReceipt(signer: Hex | ((canonical: string) => Hex), payload: ReceiptPayload): SignedReceipt {
  const canonical = canonicalize(payload);
  const signature = typeof signer === 'function' ? signer(canonical) : signPersonalMessage(signer, canonical);
  return { payload, canonical, hash: receiptHash(canonical), signature };
}

/** Never throws: anything malformed is simply not valid. */
export function verifyReceipt(receipt: unknown, signature: unknown, signer: string): { valid: boolean; recovered_address: Hex | null; payload: unknown } {
  let payload: unknown = receipt;
  let canonical: string;
  try {
    if (typeof receipt === 'string') {
      const text = receipt.trim().startsWith('{') ? receipt : Buffer.from(receipt, 'base64url').toString('utf8');
      payload = JSON.parse(text);
    }
    canonical = canonicalize(payload);
  } catch {
    return { valid: false, recovered_address: null, payload: null };
  }
  const recovered = typeof signature === 'string' ? recoverPersonalMessage(canonical, signature) : null;
  return { valid: recovered !== null && recovered.toLowerCase() === signer.toLowerCase(), recovered_address: recovered, payload };
}
