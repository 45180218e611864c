import { Pool, type Dispatcher } from 'undici';
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
 * Connection pools to the providers: undici, one pool per origin, which costs markedly less CPU per call
 * than node:http (at concurrency 64 the gateway spent about a fifth less per request). Idle connections
 * close before a server's advertised keep-alive timeout. Time limits are per call (`timeoutMs`).
 */
const pools = new Map<string, Pool>();
/** Each provider URL's pool and path, resolved once (a URL parsed per call cost measurable CPU at high rates). */
const targets = new Map<string, { pool: Pool; path: string }>();
function target(url: string): { pool: Pool; path: string } {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    let pool = pools.get(u.origin);
    if (!pool) pools.set(u.origin, (pool = new Pool(u.origin, { connections: 1024, keepAliveTimeout: 4_000, headersTimeout: 0, bodyTimeout: 0 })));
    t = { pool, path: u.pathname + u.search };
    if (targets.size < 1024) targets.set(url, t);
  }
  return t;
}

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

/**
 * A server closes idle keep-alive connections on its own schedule (Node's after 5 s), and a request written
 * to one just as it closes fails before any answer. That request is sent once more (on another connection),
 * and only then: never after an answer began, never when the connection was new, never twice.
 */
async function once<T>(signal: AbortSignal, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    if (signal.aborted || !closedWhileIdle(e)) throw e;
    return call();
  }
}

export type UpstreamAnswer = Dispatcher.ResponseData;

const UNDICI_TIMEOUTS = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** An error answer's body, parsed when it is JSON (for its message). */
function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** With `timeoutMs`, undici bounds the wait for the head and then each wait between two body chunks. */
const limits = (timeoutMs?: number) => (timeoutMs ? { headersTimeout: timeoutMs, bodyTimeout: timeoutMs } : {});

/** POSTs JSON; resolves with the response once its head arrived. `signal` aborts the request and its body. */
export function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal, timeoutMs?: number): Promise<UpstreamAnswer> {
  const t = target(url);
  return once(signal, () => t.pool.request({ path: t.path, method: 'POST', headers, body, signal, ...limits(timeoutMs) }));
}

export class ProviderClient {
  constructor(private readonly timeoutMs: number) {}

  private headers(p: ProviderConfig, stream: boolean): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
    if (p.apiKey) headers.authorization = `Bearer ${p.apiKey}`;
    return headers;
  }

  /**
   * A non-streamed call: the parsed JSON answer, or a mapped error. The time limit bounds the wait for the
   * answer's head and then each wait for more of its body (undici's timers: no timer or abort controller of
   * our own per call).
   */
  async json(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const who = `Provider ${p.name}`;
    try {
      const res = await post(p.baseUrl + path, this.headers(p, false), JSON.stringify(body), signal, this.timeoutMs);
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, parsed(await res.body.text().catch(() => '')), who);
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
      res = await post(p.baseUrl + path, this.headers(p, true), JSON.stringify(body), ac.signal);
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, parsed(await res.body.text().catch(() => '')), who);
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
