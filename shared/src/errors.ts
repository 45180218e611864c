/**
 * The error envelope every route answers with: `{error: {type, message, ...}}`.
 * `type` is stable and is what clients branch on; `message` is for people.
 */
export const ERROR_TYPES = {
  invalid_request: 400,
  invalid_json: 400,
  invalid_cursor: 400,
  /** A guardrail rule set of the key's policy blocked the request or its answer (guardrails). */
  guardrail_blocked: 400,
  authentication_required: 401,
  invalid_credential: 401,
  wrong_credential_kind: 401,
  invalid_siwe: 401,
  /** A passkey (WebAuthn) response that does not verify: wrong origin or RP id, unknown, used or expired challenge, bad signature, counter not increasing. */
  invalid_passkey: 401,
  insufficient_credit: 402,
  spend_cap_reached: 402,
  circuit_breaker_tripped: 402,
  /** A paid service invoked without a payment, or with one refused (`reason` names why); the body carries the x402 terms. */
  payment_required: 402, // marketplace
  insufficient_scope: 403,
  /** A mandate's key (or a key below one) naming a model outside its allow list. */
  model_not_allowed: 403, // mandates
  /** A mandate's key (or a key below one) calling a route outside its allow list. */
  route_not_allowed: 403, // mandates
  account_suspended: 403,
  payload_denied: 403,
  /** An unsafe request authenticated by the session cookie that did not come from the gateway's own origin. */
  csrf_refused: 403,
  forbidden: 403,
  not_found: 404,
  /** The resource is there but its content is not any more (a file past its TTL or its batch's end). */
  gone: 410,
  method_not_allowed: 405,
  conflict: 409,
  wallet_taken: 409,
  last_wallet: 409,
  idempotency_conflict: 409,
  /** A conditional write (If-Match, If-None-Match) whose condition does not hold; the body names the current version. */
  precondition_failed: 412, // state
  payload_too_large: 413,
  unsupported_media_type: 415,
  transfer_rejected: 422,
  rate_limited: 429,
  internal_error: 500,
  /** A group the operator has not switched on (the dark pool) or not configured (holder support claims without a Solana RPC). */
  not_enabled: 501, // dark pool, holder support claims
  /** A capability this build does not implement (a benchmark's confidential privacy tier). */
  not_implemented: 501, // benchmarks
  upstream_error: 502,
  no_capacity: 503,
  unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

export interface ErrorBody {
  error: {
    type: ErrorType | (string & {});
    message: string;
    param?: string;
    request_id?: string;
    [extra: string]: unknown;
  };
}

/** A domain error carrying its HTTP status; the gateway's error handler renders it as the envelope. */
export class ServiceError extends Error {
  readonly status: number;
  constructor(
    readonly type: ErrorType,
    message: string,
    readonly extra: Record<string, unknown> = {},
    status?: number,
  ) {
    super(message);
    this.name = 'ServiceError';
    this.status = status ?? ERROR_TYPES[type];
  }
}

export const invalid = (message: string, param?: string) =>
  new ServiceError('invalid_request', message, param ? { param } : {});
export const notFound = (what: string) => new ServiceError('not_found', `${what} not found`);
export const conflict = (message: string) => new ServiceError('conflict', message);
