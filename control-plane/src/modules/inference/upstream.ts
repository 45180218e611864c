import { Agent, request, type Dispatcher } from 'undici';
import { ServiceError, SseParser } from '@svc/shared';
import type { ProviderConfig } from '../../config.ts';

/**
 * HTTP to configured OpenAI-compatible providers, and the mapping of upstream failures to our errors:
 * the upstream refusing the request (400, 413, 422) is our 400 with its message; 429 is our 429; a time
 * limit is our 504 upstream_timeout; anything else (5xx, auth, unreachable, a broken stream) is our 502
 * upstream_error, without the upstream's body (it may describe our credentials or internals).
 */
export function upstreamHttpError(status: number, body: unknown, who: string): ServiceError {
  const msg = upstreamMessage(body);
  if (status === 400 || status === 413 || status === 422) {
    return new ServiceError('invalid_request', `The upstream refused the request${msg ? `: ${msg}` : ''}`, { upstream_status: status });
  }
  if (status === 429) return new ServiceError('rate_limited', `${who} is rate limiting; retry shortly`, { upstream_status: status, retry_after: 5 });
  if (status === 408 || status === 504) return new ServiceError('upstream_timeout', `${who} timed out`, { upstream_status: status });
  if (status === 0) return new ServiceError('upstream_error', `${who} could not be reached`);
  return new ServiceError('upstream_error', `${who} failed (HTTP ${status})`, { upstream_status: status });
}

/** The error an upstream reported inside a stream (an `{"error": ...}` chunk). */
export function upstreamStreamError(err: unknown, who: string): ServiceError {
  const msg = upstreamMessage({ error: err });
  return new ServiceError('upstream_error', `${who} failed mid-stream${msg ? `: ${msg}` : ''}`);
}

function upstreamMessage(body: unknown): string {
  const e = (body as { error?: unknown } | null)?.error;
  const m = typeof e === 'string' ? e : typeof (e as { message?: unknown } | undefined)?.message === 'string' ? (e as { message: string }).message : typeof body === 'string' ? body : '';
  return m.slice(0, 500);
}

export const timeoutError = (who: string, ms: number) => new ServiceError('upstream_timeout', `${who} did not answer within ${Math.round(ms / 1000)} s`);

/**
 * Connection pools to the providers: undici, which costs markedly less CPU per call than node:http (at
 * concurrency 64 the gateway spent about a fifth less per request). Idle connections close before a
 * server's advertised keep-alive timeout; our own timers bound every call (undici's are off).
 */
const pool = new Agent({ connections: 1024, keepAliveTimeout: 4_000, headersTimeout: 0, bodyTimeout: 0 });

/** How undici reports a kept-alive connection that the server closed under a request. */
const CLOSED_UNDER = new Set(['other side closed', 'closed']);

/**
 * Whether a call failed before any answer because its kept-alive connection was closed under it: undici's
 * socket errors carry the connection's byte counts, and a connection that had read nothing was new (its
 * server may have taken the request, so it is never re-sent).
 */
function closedWhileIdle(e: unknown): boolean {
  const err = e as { code?: string; message?: string; socket?: { bytesRead?: number } };
  return err?.code === 'UND_ERR_SOCKET' && CLOSED_UNDER.has(err.message ?? '') && (err.socket?.bytesRead ?? 0) > 0;
}

export type UpstreamAnswer = Dispatcher.ResponseData;

const UNDICI_TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** An error answer's body, parsed when it is JSON (for its message). */
async function readBody(res: UpstreamAnswer): Promise<unknown> {
  const text = await res.body.text().catch(() => '');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * POSTs JSON; resolves with the response once its head arrived. `signal` aborts the request and its body.
 * A server closes idle keep-alive connections on its own schedule (Node's after 5 s), and a request written
 * to one just as it closes fails before any answer. That request is sent once more (on another connection),
 * and only then: never after an answer began, never when the connection was new, never twice.
 */
export async function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal, timeoutMs?: number): Promise<UpstreamAnswer> {
  // With `timeoutMs`, undici bounds the wait for the head and then each wait between two body chunks.
  const limits = timeoutMs ? { headersTimeout: timeoutMs, bodyTimeout: timeoutMs } : {};
  for (let attempt = 0; ; attempt++) {
    try {
      return await request(url, { method: 'POST', headers, body, signal, dispatcher: pool, ...limits });
    } catch (e) {
      if (attempt > 0 || signal.aborted || !closedWhileIdle(e)) throw e;
    }
  }
}

export class ProviderClient {
  constructor(private readonly timeoutMs: number) {}

  private request(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal, stream: boolean, timeoutMs?: number): Promise<UpstreamAnswer> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
    if (p.apiKey) headers.authorization = `Bearer ${p.apiKey}`;
    return post(p.baseUrl + path, headers, JSON.stringify(body), signal, timeoutMs);
  }

  /**
   * A non-streamed call: the parsed JSON answer, or a mapped error. The time limit bounds the wait for the
   * answer's head and then each wait for more of its body (undici's timers: no timer or abort controller of
   * our own per call).
   */
  async json(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const who = `Provider ${p.name}`;
    try {
      const res = await this.request(p, path, body, signal, false, this.timeoutMs);
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await readBody(res), who);
      const text = await res.body.text();
      try {
        return JSON.parse(text);
      } catch {
        throw new ServiceError('upstream_error', `${who} answered something other than JSON`);
      }
    } catch (e) {
      if (e instanceof ServiceError) throw e;
      if (signal.aborted) throw e;
      if (UNDICI_TIMEOUTS.has((e as { code?: string }).code ?? '')) throw timeoutError(who, this.timeoutMs);
      throw upstreamHttpError(0, null, who);
    }
  }

  /**
   * A streamed call: resolves once the upstream answered 200 (else throws the mapped error), then yields
   * each SSE `data:` payload. The time limit applies to the answer and again between two chunks.
   */
  async stream(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal): Promise<AsyncIterable<string>> {
    const who = `Provider ${p.name}`;
    const ac = new AbortController();
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        ac.abort(new Error('upstream time limit'));
      }, this.timeoutMs);
    };
    const onAbort = () => ac.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    arm();
    let res: UpstreamAnswer;
    try {
      res = await this.request(p, path, body, ac.signal, true);
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await readBody(res), who);
    } catch (e) {
      cleanup();
      if (e instanceof ServiceError) throw e;
      if (timedOut) throw timeoutError(who, this.timeoutMs);
      if (signal.aborted) throw e;
      throw upstreamHttpError(0, null, who);
    }
    const source = res.body as AsyncIterable<Buffer>;
    const timeoutMs = this.timeoutMs;
    return (async function* () {
      const parser = new SseParser();
      const decoder = new TextDecoder();
      let complete = false;
      try {
        for await (const bytes of source) {
          arm();
          for (const f of parser.push(decoder.decode(bytes, { stream: true }))) if (f.data) yield f.data;
        }
        complete = true;
        for (const f of parser.end()) if (f.data) yield f.data;
      } catch (e) {
        if (timedOut) throw timeoutError(who, timeoutMs);
        if (signal.aborted) throw e;
        throw new ServiceError('upstream_error', `${who} broke off the stream`);
      } finally {
        cleanup();
        // A consumer that stopped early closes the upstream request (the connection is not reused).
        if (!complete && !ac.signal.aborted) ac.abort(new Error('stream consumer done'));
      }
    })();
  }
}
