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

  /**
   * One request, its answer read by `read` once its status is a success; an error status is read (capped)
   * for its message. Failures map as the class says; what `read` throws for its own reasons (TakeFailed)
   * passes unchanged.
   */
  private async request<T>(p: MediaProvider<unknown>, method: string, path: string, body: unknown, signal: AbortSignal | undefined, read: (res: Response, who: string) => Promise<T>): Promise<T> {
    const who = `Provider ${p.name}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (p.apiKey) headers.authorization = `Bearer ${p.apiKey}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      const res = await fetch(p.baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: both });
      if (res.status < 200 || res.status >= 300) {
        let parsed: unknown = (await readCapped(res, this.maxBytes, who)).toString('utf8');
        try {
          parsed = JSON.parse(parsed as string);
        } catch {
          /* not JSON */
        }
        throw new UpstreamStatusError(res.status, upstreamHttpError(res.status, parsed, who));
      }
      return await read(res, who);
    } catch (e) {
      if (e instanceof TakeFailed) throw e.cause;
      if (e instanceof UpstreamStatusError || e instanceof ServiceError) throw e;
      if (signal?.aborted) throw e;
      if (timeout.aborted) throw timeoutError(who, this.timeoutMs);
      throw upstreamHttpError(0, null, who);
    }
  }

  private async call(p: MediaProvider<unknown>, method: string, path: string, body: unknown, signal: AbortSignal | undefined): Promise<{ bytes: Buffer; type: string }> {
    return this.request(p, method, path, body, signal, async (res, who) => ({ bytes: await readCapped(res, this.maxBytes, who), type: res.headers.get('content-type') ?? '' }));
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

  /**
   * A file (a video), given to `take` a piece at a time as it arrives, up to the size limit and within the
   * time limit; resolves with its size. What `take` throws ends the download and is thrown as it is.
   */
  download(p: MediaProvider<unknown>, path: string, take: (piece: Buffer) => Promise<void>): Promise<number> {
    return this.request(p, 'GET', path, undefined, undefined, async (res, who) => {
      let n = 0;
      await readPieces(res, this.maxBytes, who, async (piece) => {
        n += piece.length;
        await take(piece).catch((e: unknown) => {
          throw new TakeFailed(e);
        });
      });
      return n;
    });
  }
}

/** What the caller's `take` threw, passed through the upstream's error mapping unchanged. */
class TakeFailed {
  constructor(readonly cause: unknown) {}
}

/** The mapped ServiceError of any failure from MediaClient. */
export const mapped = (e: unknown) => (e instanceof UpstreamStatusError ? e.mapped : e);

/** The answer's body in the pieces it arrives in, refused past `max` bytes (declared or counted). */
async function readPieces(res: Response, max: number, who: string, each: (piece: Buffer) => void | Promise<void>): Promise<void> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => undefined);
    throw new ServiceError('upstream_error', `${who} answered more than ${max} bytes`);
  }
  if (!res.body) return;
  let n = 0;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      n += value.byteLength;
      if (n > max) throw new ServiceError('upstream_error', `${who} answered more than ${max} bytes`);
      await each(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
    }
  } catch (e) {
    await reader.cancel().catch(() => undefined);
    throw e;
  }
}

async function readCapped(res: Response, max: number, who: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  await readPieces(res, max, who, (piece) => void parts.push(piece));
  return Buffer.concat(parts);
}
