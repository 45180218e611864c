import { canonicalize, receiptHash, verifyReceipt } from '@svc/shared';

/** A stored receipt row, as far as integrity checks need it. */
export interface StoredReceipt {
  id: string;
  payload: string;
  hash: string;
  signature: string;
  run_seq: number | null;
  prev_hash: string | null;
}

export interface ReceiptCheck {
  /** The stored text parses and is already RFC 8785 canonical. */
  canonical: boolean;
  /** The stored hash equals 0x sha256 of the stored text. */
  hash: boolean;
  /** The signature over the text recovers to the signer. */
  signature: boolean;
  recovered_address: string | null;
  payload: Record<string, unknown> | null;
  /** All three hold. */
  valid: boolean;
}

export function parsePayload(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Recomputes one stored receipt from its stored text alone; never throws. */
export function checkReceipt(row: Pick<StoredReceipt, 'payload' | 'hash' | 'signature'>, signer: string): ReceiptCheck {
  const payload = parsePayload(row.payload);
  let canonical = false;
  if (payload) {
    try {
      canonical = canonicalize(payload) === row.payload;
    } catch {
      canonical = false;
    }
  }
  const hash = receiptHash(row.payload) === row.hash;
  const sig = verifyReceipt(row.payload, row.signature, signer);
  const signature = payload !== null && sig.valid;
  return { canonical, hash, signature, recovered_address: sig.recovered_address, payload, valid: canonical && hash && signature };
}

export interface RunRecord {
  id: string;
  account_id: string;
  head_hash: string;
  receipt_count: number;
  total_cost_micro_usd: number;
}

export interface ChainCheck {
  chain_valid: boolean;
  failures: string[];
  checked: number;
}

const MAX_FAILURES = 50;

/**
 * Recomputes a run chain from its stored receipts (in run_seq order) without trusting any stored link:
 * every hash is sha256 of the canonical text, every prev_hash is the recomputed hash of the receipt
 * before (null for the first), seq runs 1..n, the signed payload names the same run position, every
 * signature recovers to the signer, and the run row's head, count and total agree with the receipts.
 */
export function checkChain(run: RunRecord, rows: StoredReceipt[], signer: string): ChainCheck {
  const failures: string[] = [];
  const fail = (msg: string) => {
    if (failures.length < MAX_FAILURES) failures.push(msg);
  };
  let prev: string | null = null;
  let cost = 0;
  rows.forEach((row, i) => {
    const seq = i + 1;
    const at = `seq ${seq} (${row.id})`;
    const c = checkReceipt(row, signer);
    if (!c.payload) fail(`${at}: payload is not a JSON object`);
    else if (!c.canonical) fail(`${at}: payload is not RFC 8785 canonical`);
    if (!c.hash) fail(`${at}: hash is not sha256 of the payload`);
    if (!c.signature) fail(`${at}: signature does not recover to the signer`);
    if (row.run_seq !== seq) fail(`${at}: stored seq is ${row.run_seq}`);
    if (row.prev_hash !== prev) fail(`${at}: prev_hash does not link to the previous receipt`);
    const link = c.payload?.run as { id?: unknown; seq?: unknown; prev?: unknown } | null | undefined;
    if (!link || link.id !== run.id || link.seq !== seq || link.prev !== prev) fail(`${at}: signed run link differs from its chain position`);
    if (c.payload && c.payload.account_id !== run.account_id) fail(`${at}: signed account differs from the run's account`);
    const k = c.payload?.cost_micro_usd;
    if (typeof k === 'number' && Number.isSafeInteger(k)) cost += k;
    else fail(`${at}: cost_micro_usd is not an integer`);
    prev = receiptHash(row.payload);
  });
  if (rows.length !== run.receipt_count) fail(`run records ${run.receipt_count} receipts, ${rows.length} stored`);
  if (prev !== run.head_hash) fail('run head_hash is not the hash of the last receipt');
  if (cost !== run.total_cost_micro_usd) fail(`run total ${run.total_cost_micro_usd} micro-USD differs from the receipts' sum ${cost}`);
  return { chain_valid: failures.length === 0, failures, checked: rows.length };
}
