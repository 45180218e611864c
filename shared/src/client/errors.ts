import type { components, paths } from './generated/openapi.ts';

/** The gateway's error envelope (components.schemas.Error): `{error: {type, message, param?, request_id?, ...extra}}`. */
export type ErrorEnvelope = components['schemas']['Error'];

/**
 * One x402 (version 1) payment option of a 402 `insufficient_credit` (components.schemas.PaymentRequired):
 * pay `maxAmountRequired` base units of `asset` to `payTo` on `network`.
 */
export type PaymentTerms = NonNullable<components['schemas']['PaymentRequired']['error']['accepts']>[number];

/** The envelope of a 402 `insufficient_credit`: the payment terms ride inside `error`. */
export interface InsufficientCreditBody {
  error: ErrorEnvelope['error'] & { type: 'insufficient_credit'; x402Version?: 1; accepts: PaymentTerms[] };
}

/**
 * The 402 of `POST /v1/services/{slug}/invoke`: x402 version 1's PaymentRequired (`error` a string, as its
 * clients read it), with the gateway's error object beside it in `svc_error`.
 */
export type X402PaymentRequired = paths['/v1/services/{slug}/invoke']['post']['responses'][402]['content']['application/json'];

/** The envelope of an error answer: `{error: {...}}`, or an x402 PaymentRequired's `svc_error` as that envelope. */
function envelope(body: unknown): ErrorEnvelope | undefined {
  if (typeof body !== 'object' || body === null || !('error' in body)) return undefined;
  const e = (body as { error: unknown }).error;
  if (typeof e === 'object' && e !== null) return body as ErrorEnvelope;
  const beside = (body as { svc_error?: unknown }).svc_error;
  return typeof beside === 'object' && beside !== null ? ({ error: beside } as ErrorEnvelope) : undefined;
}

/** Seconds of a Retry-After value: delta-seconds, or an HTTP date measured from `now`. */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now) / 1000)) : undefined;
}

/**
 * An error answer from the gateway with its envelope intact: `body` is exactly what the gateway sent
 * (`{error: {type, message, param?, request_id?, ...extra}}`; for an x402 PaymentRequired, its `svc_error` as
 * `error`, and `payment` the whole x402 body), `headers` its response headers.
 */
export class ApiError extends Error {
  readonly type: string;
  readonly param: string | undefined;
  readonly requestId: string | undefined;
  readonly body: ErrorEnvelope | undefined;
  /** The x402 version 1 PaymentRequired of a 402 that is one (a service invoke without a valid payment). */
  readonly payment: X402PaymentRequired | undefined;
  constructor(
    readonly status: number,
    body: unknown,
    readonly headers: Headers,
  ) {
    const env = envelope(body);
    super(typeof env?.error.message === 'string' ? env.error.message : `HTTP ${status}`);
    this.name = 'ApiError';
    this.body = env;
    this.type = typeof env?.error.type === 'string' ? env.error.type : 'unknown';
    this.param = typeof env?.error.param === 'string' ? env.error.param : undefined;
    this.requestId = typeof env?.error.request_id === 'string' ? env.error.request_id : (headers.get('x-request-id') ?? undefined);
    const x402 = body as { x402Version?: unknown; error?: unknown } | null;
    this.payment = status === 402 && typeof x402 === 'object' && x402?.x402Version === 1 && typeof x402.error === 'string' ? (body as X402PaymentRequired) : undefined;
  }

  /** The error object's fields beyond type, message, param and request_id (limits, ids, payment terms...). */
  get extra(): Record<string, unknown> {
    const { type: _t, message: _m, param: _p, request_id: _r, ...rest } = this.body?.error ?? ({} as ErrorEnvelope['error']);
    return rest;
  }

  /** Only this 402 is cleared by paying; spend caps and the circuit breaker are not. */
  isInsufficientCredit(): this is ApiError & { body: InsufficientCreditBody } {
    return this.status === 402 && this.type === 'insufficient_credit';
  }

  /** The x402 payment terms of an `insufficient_credit`; empty for every other error. */
  get paymentTerms(): PaymentTerms[] {
    if (!this.isInsufficientCredit()) return [];
    const accepts = this.body.error.accepts;
    return Array.isArray(accepts) ? accepts : [];
  }

  /** Seconds to wait before retrying a 429 or 503: the Retry-After header, else the body's `retry_after`. */
  get retryAfterSeconds(): number | undefined {
    if (this.status !== 429 && this.status !== 503) return undefined;
    const fromHeader = retryAfterSeconds(this.headers.get('retry-after'));
    if (fromHeader !== undefined) return fromHeader;
    const fromBody = this.body?.error.retry_after;
    return typeof fromBody === 'number' && Number.isFinite(fromBody) && fromBody >= 0 ? fromBody : undefined;
  }
}

/** Whether `err` is the gateway's 402 `insufficient_credit` (the one a deposit clears), with its payment terms. */
export function isInsufficientCredit(err: unknown): err is ApiError & { body: InsufficientCreditBody } {
  return err instanceof ApiError && err.isInsufficientCredit();
}
