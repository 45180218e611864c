import { Pool, type Dispatcher } from 'undici';
import { ServiceError, SseParser, frameData } from '@svc/shared';
import { CallSlots } from './call-slots.ts';
import { stallTrace } from '../platform/stall-trace.ts';
import type { ProviderConfig } from '../../config.ts';
import type { CallerSignal } from '../../http/caller-signal.ts';

/**
 * HTTP to configured OpenAI-compatible providers, and the mapping of upstream failures to our errors:
 * the upstream refusing the request (400, 413, 422) is our 400 with its message; 429 is our 429; a time
 * limit is our 504 upstream_timeout; anything else (5xx, auth, unreachable, a broken stream) is our 502
 * upstream_error, without the upstream's body (it may describe our credentials or internals).
 */
/** Seconds a Retry-After header asks for (a number, or an HTTP date), 1 to 3600; null when absent or unreadable. */
export function retryAfterSeconds(value: string | string[] | undefined, now = Date.now()): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  const s = /^\s*\d+\s*$/.test(v) ? Number(v) : Math.ceil((Date.parse(v) - now) / 1000);
  return Number.isFinite(s) ? Math.min(3600, Math.max(1, s)) : null;
}

/** `retryAfter`: the upstream's own Retry-After on a 429, in seconds (5 without one). */
export function upstreamHttpError(status: number, body: unknown, who: string, retryAfter: number | null = null): ServiceError {
  const msg = upstreamMessage(body);
  if (status === 400 || status === 413 || status === 422) {
    return new ServiceError('invalid_request', `The upstream refused the request${msg ? `: ${msg}` : ''}`, { upstream_status: status });
  }
  if (status === 429) return new ServiceError('rate_limited', `${who} is rate limiting; retry shortly`, { upstream_status: status, retry_after: retryAfter ?? 5 });
  if (status === 408 || status === 504) return new ServiceError('upstream_timeout', `${who} timed out`, { upstream_status: status });
  if (status === 0) return new ServiceError('upstream_error', `${who} could not be reached`);
  return new ServiceError('upstream_error', `${who} failed (HTTP ${status})`, { upstream_status: status });
}

/**
 * An error the upstream reported inside a stream. One that carries an HTTP status (`code` or `status`, as
 * vLLM and llama.cpp's server put it) or OpenAI's `invalid_request_error` type maps like that status would;
 * anything else is an upstream failure, whose message stays here like a 5xx body's (a server's crash report
 * can name its files, devices and local model).
 */
export function upstreamStreamError(err: unknown, who: string): ServiceError {
  const status = errorStatus(err);
  if (status !== null) return upstreamHttpError(status, { error: err }, who);
  return new ServiceError('upstream_error', `${who} failed mid-stream`);
}

/** The HTTP status an upstream's error object names (400-599), or 400 for OpenAI's `invalid_request_error`; else null. */
function errorStatus(err: unknown): number | null {
  if (!err || typeof err !== 'object') return null;
  const e = err as { code?: unknown; status?: unknown; type?: unknown };
  for (const v of [e.code, e.status]) {
    const n = typeof v === 'string' && /^\d{3}$/.test(v) ? Number(v) : v;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 400 && n <= 599) return n;
  }
  return e.type === 'invalid_request_error' ? 400 : null;
}

/**
 * An answer of 200 that is an error all the same: an `error` and none of the results (`choices`, `data`), as
 * some OpenAI-compatible servers answer when a model is overloaded or fails. Mapped like its status; null
 * for a real answer.
 */
function errorAnswer(body: unknown, who: string): ServiceError | null {
  if (!body || typeof body !== 'object') return null;
  const b = body as { error?: unknown; choices?: unknown; data?: unknown };
  if (!b.error || Array.isArray(b.choices) || Array.isArray(b.data)) return null;
  return upstreamHttpError(errorStatus(b.error) ?? 502, body, who);
}

/**
 * What is wrong with a 200 answer, if anything: an error under it (`errorAnswer`), or no results (a chat
 * completion without `choices`, embeddings without `data`). Nothing was delivered, so nothing is charged.
 */
export function answerError(use: 'chat' | 'embeddings', body: unknown, who: string): ServiceError | null {
  const failed = errorAnswer(body, who);
  if (failed) return failed;
  const key = use === 'chat' ? 'choices' : 'data';
  if (body && typeof body === 'object' && Array.isArray((body as Record<string, unknown>)[key])) return null;
  return new ServiceError('upstream_error', `${who} answered without ${key}`);
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
/** Connections per provider origin; ProviderClient's calls beyond them wait for one in its `CallSlots`. */
export const PROVIDER_CONNECTIONS = 1024;

interface Target {
  pool: Pool;
  path: string;
  /** The pool's connections as slots for ProviderClient's calls (shared by every URL of the pool). */
  slots: CallSlots;
}
const pools = new Map<string, { pool: Pool; slots: CallSlots }>();
/** Each provider URL's pool and path, resolved once (a URL parsed per call cost measurable CPU at high rates). */
const targets = new Map<string, Target>();
function target(url: string, timeoutMs = 0, connections = PROVIDER_CONNECTIONS): Target {
  const key = `${timeoutMs} ${connections} ${url}`;
  let t = targets.get(key);
  if (!t) {
    const u = new URL(url);
    const poolKey = `${timeoutMs} ${connections} ${u.origin}`;
    let pooled = pools.get(poolKey);
    const connect = timeoutMs ? { connect: { timeout: timeoutMs } } : {};
    if (!pooled) {
      const pool = new Pool(u.origin, { connections, keepAliveTimeout: 4_000, headersTimeout: 0, bodyTimeout: 0, ...connect });
      pools.set(poolKey, (pooled = { pool, slots: new CallSlots(connections) }));
    }
    t = { pool: pooled.pool, slots: pooled.slots, path: u.pathname + u.search };
    if (targets.size < 1024) targets.set(key, t);
  }
  return t;
}

export type UpstreamAnswer = Dispatcher.ResponseData;

const UNDICI_TIMEOUTS = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** A body's text, parsed when it is JSON (an error answer's, for its message). */
function maybeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** An error answer's body, read whole and parsed when it is JSON. */
async function errorBody(res: UpstreamAnswer): Promise<unknown> {
  return maybeJson(await res.body.text().catch(() => ''));
}

/**
 * POSTs JSON; resolves with the response once its head arrived. `signal` aborts the request and its body.
 * With `timeoutMs`, undici bounds connecting, the wait for the head, and then each wait between two body
 * chunks, not a wait in the pool's queue for a connection (ProviderClient's calls never wait there).
 */
export function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal, timeoutMs?: number): Promise<UpstreamAnswer> {
  return send(target(url, timeoutMs), headers, body, signal, timeoutMs);
}

function send(t: Target, headers: Record<string, string>, body: string, signal: AbortSignal, timeoutMs?: number): Promise<UpstreamAnswer> {
  const limits = timeoutMs ? { headersTimeout: timeoutMs, bodyTimeout: timeoutMs } : {};
  return t.pool.request({ path: t.path, method: 'POST', headers, body, signal, ...limits });
}

/**
 * POSTs JSON and reads the whole answer, as a dispatch handler of undici's: no response stream, no
 * AbortSignal listener and no async resource per call (`pool.request` spent about 5% of the event loop on
 * those at high request rates). `caller` going away aborts the request, at once if it is on a connection,
 * else as soon as it gets one. Time limits as for `send`.
 */
function sendWhole(t: Target, headers: Record<string, string>, body: string, caller: CallerSignal, timeoutMs?: number): Promise<WholeAnswer> {
  return new Promise((resolve, reject) => {
    const limits = timeoutMs ? { headersTimeout: timeoutMs, bodyTimeout: timeoutMs } : {};
    t.pool.dispatch({ path: t.path, method: 'POST', headers, body, ...limits }, new WholeReader(caller, resolve, reject));
  });
}

interface WholeAnswer {
  status: number;
  text: string;
  retryAfter: number | null;
}

/** sendWhole's dispatch handler: methods rather than closures made per call. */
class WholeReader implements Dispatcher.DispatchHandlers {
  private abort: ((err: Error) => void) | null = null;
  private status = 0;
  private retryAfter: number | null = null;
  private readonly chunks: Buffer[] = [];
  /** Listens for the caller going away. */
  private readonly onGone = this.gone.bind(this);

  constructor(
    private readonly caller: CallerSignal,
    private readonly resolve: (a: WholeAnswer) => void,
    private readonly reject: (e: Error) => void,
  ) {
    caller.addEventListener('abort', this.onGone, { once: true });
  }

  private gone(): void {
    this.abort?.(this.caller.reason instanceof Error ? this.caller.reason : new Error('caller went away'));
  }

  onConnect(abort: (err: Error) => void): void {
    this.abort = abort;
    if (this.caller.aborted) this.onGone();
  }

  onHeaders(statusCode: number, raw: Buffer[] | string[] | null): boolean {
    this.status = statusCode;
    if (statusCode === 429 && raw) {
      for (let i = 0; i + 1 < raw.length; i += 2) if (String(raw[i]).toLowerCase() === 'retry-after') this.retryAfter = retryAfterSeconds(String(raw[i + 1]));
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    this.caller.removeEventListener('abort', this.onGone);
    const c = this.chunks;
    this.resolve({ status: this.status, text: c.length === 1 ? c[0]!.toString('utf8') : Buffer.concat(c).toString('utf8'), retryAfter: this.retryAfter });
  }

  onError(err: Error): void {
    this.caller.removeEventListener('abort', this.onGone);
    this.reject(err);
  }
}

export class ProviderClient {
  /** `connections`: per provider origin (tests use a few). */
  constructor(
    private readonly timeoutMs: number,
    private readonly connections = PROVIDER_CONNECTIONS,
  ) {}

  /** The request headers of each provider, made once per provider and kind of call (undici only reads them). */
  private readonly headerSets = new WeakMap<ProviderConfig, { json: Record<string, string>; stream: Record<string, string> }>();

  private headers(p: ProviderConfig, stream: boolean): Record<string, string> {
    let sets = this.headerSets.get(p);
    if (!sets) {
      const auth: Record<string, string> = p.apiKey ? { authorization: `Bearer ${p.apiKey}` } : {};
      sets = { json: { 'content-type': 'application/json', accept: 'application/json', ...auth }, stream: { 'content-type': 'application/json', accept: 'text/event-stream', ...auth } };
      this.headerSets.set(p, sets);
    }
    return stream ? sets.stream : sets.json;
  }

  /**
   * A non-streamed call: the answer parsed, with its text (to pass on as it came when nothing in it
   * changes), or a mapped error. The time limit bounds the wait for a connection when all are busy, then
   * connecting, the wait for the answer's head and each wait for more of its body (undici's timers: no
   * timer or listener of our own per call while a connection is free).
   */
  async json(p: ProviderConfig, path: string, body: unknown, signal: CallerSignal): Promise<{ body: unknown; text: string }> {
    const who = `Provider ${p.name}`;
    if (signal.aborted) throw signal.reason; // a caller already gone costs no connection
    const payload = JSON.stringify(body);
    const t = target(p.baseUrl + path, this.timeoutMs, this.connections);
    if (!t.slots.tryTake()) await t.slots.wait(signal, this.timeoutMs > 0 ? { ms: this.timeoutMs, error: () => timeoutError(who, this.timeoutMs) } : undefined);
    try {
      const t0 = stallTrace.enabled ? performance.now() : 0;
      const res = await sendWhole(t, this.headers(p, false), payload, signal, this.timeoutMs);
      stallTrace.span('upstream_wait', t0);
      if (res.status < 200 || res.status >= 300) throw upstreamHttpError(res.status, maybeJson(res.text), who, res.retryAfter);
      try {
        return { body: JSON.parse(res.text), text: res.text };
      } catch {
        throw new ServiceError('upstream_error', `${who} answered something other than JSON`);
      }
    } catch (e) {
      if (e instanceof ServiceError) throw e;
      if (signal.aborted) throw e;
      if (UNDICI_TIMEOUTS.has((e as { code?: string }).code ?? '')) throw timeoutError(who, this.timeoutMs);
      throw upstreamHttpError(0, null, who);
    } finally {
      t.slots.release();
    }
  }

  /**
   * A streamed call: resolves once the upstream answered 200 (else throws the mapped error), then yields
   * each SSE `data:` payload. The time limit applies to the answer and again between two chunks.
   */
  async stream(p: ProviderConfig, path: string, body: unknown, signal: CallerSignal): Promise<AsyncIterable<string>> {
    const who = `Provider ${p.name}`;
    if (signal.aborted) throw signal.reason; // a caller already gone costs no connection
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
    const payload = JSON.stringify(body);
    const t = target(p.baseUrl + path, this.timeoutMs, this.connections); // the JSON calls' pool: one budget of connections per provider
    // The slot goes back, and the timer and the caller's listener go, when the answer's body closes: read to
    // its end, or destroyed by an abort (the timer's included, so a stream nobody reads still gives them back).
    let took = false;
    let released = false;
    const release = () => {
      if (!took || released) return;
      released = true;
      t.slots.release();
    };
    arm();
    let res: UpstreamAnswer;
    try {
      took = t.slots.tryTake();
      if (!took) {
        await t.slots.wait(ac.signal); // bounded by `arm`'s timer, which aborts `ac`
        took = true;
        arm(); // the wait used none of the time for the answer
      }
      res = await send(t, this.headers(p, true), payload, ac.signal);
      res.body.once('close', () => {
        release();
        cleanup();
      });
      const status = res.statusCode;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await errorBody(res), who, status === 429 ? retryAfterSeconds(res.headers['retry-after']) : null);
    } catch (e) {
      release();
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
          for (const f of parser.push(decoder.decode(bytes, { stream: true }))) {
            if (!f.data) continue;
            // The time a slow caller takes to take a frame is not the upstream's: the limit waits meanwhile.
            clearTimeout(timer);
            yield frameData(f);
            arm();
          }
        }
        complete = true;
        for (const f of parser.end()) if (f.data) yield frameData(f);
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
