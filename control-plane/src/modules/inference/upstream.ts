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
 * Connection pools to the providers: undici, one pool per origin (and time limit), which costs markedly
 * less CPU per call than node:http (at concurrency 64 the gateway spent about a fifth less per request).
 *
 * A request is never sent twice: a provider may have taken it (and billed it) before its connection broke.
 * The race that made re-sending tempting, a request written to a kept-alive connection just as the server
 * closes it for idleness, is avoided instead: undici retires an idle connection a second before the
 * timeout the server advertises (`Keep-Alive: timeout=N`), and after 4 s when none is advertised (common
 * servers keep idle connections 5 s or longer).
 */
/** Connections per provider origin; a call beyond them waits in the pool's queue for one. */
export const PROVIDER_CONNECTIONS = 1024;

interface Pooled {
  pool: Pool;
  connections: number;
  /** Calls of this process using or waiting for one of the pool's connections (ProviderClient's). */
  inFlight: number;
}
const pools = new Map<string, Pooled>();
/** Each provider URL's pool and path, resolved once (a URL parsed per call cost measurable CPU at high rates). */
const targets = new Map<string, { pooled: Pooled; pool: Pool; path: string }>();
function target(url: string, timeoutMs = 0, connections = PROVIDER_CONNECTIONS): { pooled: Pooled; pool: Pool; path: string } {
  const key = `${timeoutMs} ${connections} ${url}`;
  let t = targets.get(key);
  if (!t) {
    const u = new URL(url);
    const poolKey = `${timeoutMs} ${connections} ${u.origin}`;
    let pooled = pools.get(poolKey);
    const connect = timeoutMs ? { connect: { timeout: timeoutMs } } : {};
    if (!pooled) {
      const pool = new Pool(u.origin, { connections, keepAliveTimeout: 4_000, headersTimeout: 0, bodyTimeout: 0, ...connect });
      pools.set(poolKey, (pooled = { pool, connections, inFlight: 0 }));
    }
    t = { pooled, pool: pooled.pool, path: u.pathname + u.search };
    if (targets.size < 1024) targets.set(key, t);
  }
  return t;
}

export type UpstreamAnswer = Dispatcher.ResponseData;

/**
 * The answer, or the signal's reason once it aborts: undici keeps an aborted call that waits in the pool's
 * queue until a connection frees (then drops it unsent), so its promise alone would wait that long.
 */
function orAbort<T>(answer: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    answer.then(
      (v) => (signal.removeEventListener('abort', onAbort), resolve(v)),
      (e) => (signal.removeEventListener('abort', onAbort), reject(e)),
    );
  });
}

const UNDICI_TIMEOUTS = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** An error answer's body, parsed when it is JSON (for its message). */
async function errorBody(res: UpstreamAnswer): Promise<unknown> {
  const text = await res.body.text().catch(() => '');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * POSTs JSON; resolves with the response once its head arrived. `signal` aborts the request and its body.
 * With `timeoutMs`, undici bounds connecting, the wait for the head, and then each wait between two body
 * chunks; undici does not bound a wait in the pool's queue for a connection (ProviderClient does).
 */
export function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal, timeoutMs?: number, connections?: number): Promise<UpstreamAnswer> {
  return send(target(url, timeoutMs, connections), headers, body, signal, timeoutMs);
}

function send(t: { pool: Pool; path: string }, headers: Record<string, string>, body: string, signal: AbortSignal, timeoutMs?: number): Promise<UpstreamAnswer> {
  const limits = timeoutMs ? { headersTimeout: timeoutMs, bodyTimeout: timeoutMs } : {};
  return t.pool.request({ path: t.path, method: 'POST', headers, body, signal, ...limits });
}

export class ProviderClient {
  /** `connections`: per provider origin (tests use a few). */
  constructor(
    private readonly timeoutMs: number,
    private readonly connections = PROVIDER_CONNECTIONS,
  ) {}

  private headers(p: ProviderConfig, stream: boolean): Record<string, string> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
    if (p.apiKey) headers.authorization = `Bearer ${p.apiKey}`;
    return headers;
  }

  /**
   * A non-streamed call: the parsed JSON answer, or a mapped error. The time limit bounds connecting, the wait
   * for the answer's head and then each wait for more of its body, as for streams (undici's timers: no timer
   * or abort controller of our own per call, except for a call that has to wait for a connection).
   */
  async json(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const who = `Provider ${p.name}`;
    const t = target(p.baseUrl + path, this.timeoutMs, this.connections);
    const pooled = t.pooled;
    // Every connection busy: the call waits in the pool's queue, where undici's limits do not run yet, so it
    // gets a time limit of its own over the wait and the answer's head.
    const limit = this.timeoutMs > 0 && pooled.inFlight >= pooled.connections ? new AbortController() : null;
    const timer = limit ? setTimeout(() => limit.abort(new Error('upstream time limit')), this.timeoutMs) : undefined;
    const callSignal = limit ? AbortSignal.any([signal, limit.signal]) : signal;
    pooled.inFlight++;
    const answer = send(t, this.headers(p, false), JSON.stringify(body), callSignal, this.timeoutMs);
    try {
      const res = await (limit ? orAbort(answer, callSignal) : answer);
      clearTimeout(timer);
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await errorBody(res), who);
      const text = await res.body.text();
      try {
        return JSON.parse(text);
      } catch {
        throw new ServiceError('upstream_error', `${who} answered something other than JSON`);
      }
    } catch (e) {
      if (e instanceof ServiceError) throw e;
      if (signal.aborted) throw e;
      if (limit?.signal.aborted || UNDICI_TIMEOUTS.has((e as { code?: string }).code ?? '')) throw timeoutError(who, this.timeoutMs);
      throw upstreamHttpError(0, null, who);
    } finally {
      clearTimeout(timer);
      // A call given up in the queue keeps its place there until a connection frees (undici then drops it
      // unsent, its signal aborted): it counts until undici is done with it.
      if (limit) answer.then((r) => (r.body.destroy(), pooled.inFlight--), () => pooled.inFlight--);
      else pooled.inFlight--;
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
      // Raced with the signal: a call waiting for a connection in the pool's queue does not end when aborted.
      res = await orAbort(post(p.baseUrl + path, this.headers(p, true), JSON.stringify(body), ac.signal, 0, this.connections), ac.signal);
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await errorBody(res), who);
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
