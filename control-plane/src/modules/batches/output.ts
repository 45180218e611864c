import { newId, type ServiceError } from '@svc/shared';

/**
 * Lines of batch output and error files: OpenAI's batch output format plus `receipt`, the signed receipt
 * of the line's charge (null when nothing was charged):
 *
 *   {"id":"batch_req_...","custom_id":"...","response":{"status_code":200,"request_id":"req_...","body":{...}},
 *    "error":null,"receipt":{"id":"req_...","cost_micro_usd":12,"canonical":"{...}","hash":"0x...","signature":"0x...","signer":"0x..."}}
 *
 * `canonical` is the RFC 8785 JSON that `signature` signs (EIP-191); recover the signer from it with any
 * Ethereum library, or fetch the same receipt from GET /v1/receipts/{id}. A request that failed has the
 * error envelope as `response.body`; a line that never ran has `response: null` and `error: {code, message}`.
 */
export interface LineReceipt {
  id: string;
  cost_micro_usd: number;
  canonical: string;
  hash: string;
  signature: string;
  signer: string;
}

export interface OutputLine {
  id: string;
  custom_id: string | null;
  response: { status_code: number; request_id: string; body: unknown } | null;
  error: { code: string; message: string } | null;
  receipt: LineReceipt | null;
}

/** A stored receipt row (receipts table: payload is the canonical JSON) as the line's receipt. */
export function lineReceipt(r: { id: string; payload: string; hash: string; signature: string }): LineReceipt {
  const p = JSON.parse(r.payload) as { cost_micro_usd: number; signer: string };
  return { id: r.id, cost_micro_usd: p.cost_micro_usd, canonical: r.payload, hash: r.hash, signature: r.signature, signer: p.signer };
}

export function answered(customId: string, requestId: string, statusCode: number, body: unknown, receipt: LineReceipt | null): OutputLine {
  return { id: `batch_${requestId}`, custom_id: customId, response: { status_code: statusCode, request_id: requestId, body }, error: null, receipt };
}

export function notAnswered(customId: string | null, requestId: string | null, code: string, message: string, receipt: LineReceipt | null = null): OutputLine {
  return { id: requestId ? `batch_${requestId}` : newId('batch_req_', 20), custom_id: customId, response: null, error: { code, message }, receipt };
}

/** The error envelope a live call would have answered with (5xx without internals). */
export function errorBody(e: ServiceError, requestId: string): { error: Record<string, unknown> } {
  return { error: { type: e.type, message: e.message, ...e.extra, request_id: requestId } };
}

export const UNRUN: Record<'cancelled' | 'expired' | 'failed', { code: string; message: string }> = {
  cancelled: { code: 'batch_cancelled', message: 'The batch was cancelled before this request ran; it was not charged.' },
  expired: { code: 'batch_expired', message: 'This request could not be run before the completion window ended; it was not charged.' },
  failed: { code: 'batch_failed', message: 'The batch failed before this request ran; it was not charged.' },
};

export const RESPONSE_LOST = {
  code: 'response_lost',
  message: 'The gateway stopped after this request was charged but before its answer was recorded; the receipt stands and the request was not run again.',
};
