import { ServiceError } from '@svc/shared';
import type { MediaProvider } from '../../config/media.ts';
import { timeoutError, upstreamHttpError } from '../inference/upstream.ts';

/**
 * HTTP to OpenAI-compatible image and video providers. Failures map like inference's: the upstream refusing
 * the request (400, 413, 422) is our 400 with its message, 429 our 429, a time limit our 504, anything
 * else our 502 without the upstream's body. Answers are read up to a size limit.
 */
export class UpstreamStatusError extends Error {
  constructor(readonly status: number, readonly mapped: ServiceError) {
    super(mapped.message);
  }
}

export class MediaClient {
  constructor(
    private readonly timeoutMs: number,
    private readonly maxBytes: number,
  ) {}

  private async call(p: MediaProvider<unknown>, method: string, path: string, body: unknown, signal: AbortSignal | undefined): Promise<{ bytes: Buffer; type: string }> {
    const who = `Provider ${p.name}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (p.apiKey) headers.authorization = `Bearer ${p.apiKey}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      const res = await fetch(p.baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: both });
      const bytes = await readCapped(res, this.maxBytes, who);
      if (res.status < 200 || res.status >= 300) {
        let parsed: unknown = bytes.toString('utf8');
        try {
          parsed = JSON.parse(parsed as string);
        } catch {
          /* not JSON */
        }
        throw new UpstreamStatusError(res.status, upstreamHttpError(res.status, parsed, who));
      }
      return { bytes, type: res.headers.get('content-type') ?? '' };
    } catch (e) {
      if (e instanceof UpstreamStatusError || e instanceof ServiceError) throw e;
      if (signal?.aborted) throw e;
      if (timeout.aborted) throw timeoutError(who, this.timeoutMs);
      throw upstreamHttpError(0, null, who);
    }
  }

  /** A JSON call; throws UpstreamStatusError for an HTTP error status, a ServiceError otherwise. */
  async json(p: MediaProvider<unknown>, method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Record<string, unknown>> {
    const { bytes } = await this.call(p, method, path, body, signal);
    try {
      const v = JSON.parse(bytes.toString('utf8')) as unknown;
      if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Record<string, unknown>;
    } catch {
      /* below */
    }
    throw new ServiceError('upstream_error', `Provider ${p.name} answered something other than a JSON object`);
  }

  /** Raw bytes (a video file). */
  async bytes(p: MediaProvider<unknown>, path: string): Promise<Buffer> {
    return (await this.call(p, 'GET', path, undefined, undefined)).bytes;
  }
}

/** The mapped ServiceError of any failure from MediaClient. */
export const mapped = (e: unknown) => (e instanceof UpstreamStatusError ? e.mapped : e);

async function readCapped(res: Response, max: number, who: string): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => undefined);
    throw new ServiceError('upstream_error', `${who} answered more than ${max} bytes`);
  }
  if (!res.body) return Buffer.alloc(0);
  const parts: Buffer[] = [];
  let n = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > max) {
      await reader.cancel().catch(() => undefined);
      throw new ServiceError('upstream_error', `${who} answered more than ${max} bytes`);
    }
    parts.push(Buffer.from(value));
  }
  return Buffer.concat(parts);
}
