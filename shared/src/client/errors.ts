import type { ErrorBody } from '../errors.ts';

/** An error answer from the gateway, with its envelope intact. */
export class ApiError extends Error {
  readonly type: string;
  readonly param: string | undefined;
  readonly requestId: string | undefined;
  constructor(
    readonly status: number,
    readonly body: ErrorBody | undefined,
    readonly headers: Headers,
  ) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.name = 'ApiError';
    this.type = body?.error?.type ?? 'unknown';
    this.param = body?.error?.param;
    this.requestId = body?.error?.request_id;
  }

  /** Only this 402 is cleared by paying; spend caps and the circuit breaker are not. */
  isInsufficientCredit(): boolean {
    return this.type === 'insufficient_credit';
  }

  /** Seconds from Retry-After on a 429 or 503, when given. */
  get retryAfterSeconds(): number | undefined {
    const v = this.headers.get('retry-after');
    if (!v) return undefined;
    const n = Number(v);
    return Number.isFinite(n) ? n : undefined;
  }
}
