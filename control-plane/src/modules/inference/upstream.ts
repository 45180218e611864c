import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
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

/** The whole body as text (events, not async iteration: cheaper for the small answers most calls get). */
function readText(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.once('end', () => resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8')));
    res.once('error', reject);
    res.once('close', () => {
      if (!res.complete) reject(new Error('the answer was cut short'));
    });
  });
}

async function readBody(res: IncomingMessage): Promise<unknown> {
  const text = await readText(res).catch(() => '');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Keep-alive connection pools to the providers (node:http is markedly cheaper per call than fetch). */
const agents = { http: new http.Agent({ keepAlive: true, maxSockets: 1024 }), https: new https.Agent({ keepAlive: true, maxSockets: 1024 }) };

/** Request options per provider URL, parsed once (a URL per call cost measurable CPU at high rates). */
const targets = new Map<string, { mod: typeof http | typeof https; agent: http.Agent; options: http.RequestOptions }>();
function target(url: string) {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    const secure = u.protocol === 'https:';
    const options = { protocol: u.protocol, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port || (secure ? 443 : 80), path: u.pathname + u.search };
    t = { mod: secure ? https : http, agent: secure ? agents.https : agents.http, options };
    if (targets.size < 1024) targets.set(url, t);
  }
  return t;
}

/** How a kept-alive connection the server closed while it sat idle fails when it is reused. */
const STALE_CONNECTION = new Set(['ECONNRESET', 'EPIPE']);

/**
 * POSTs JSON; resolves with the response once its head arrived. `signal` aborts the request and its body.
 * A server closes idle keep-alive connections on its own schedule (Node's after 5 s), and a request written
 * to one just as it closes fails before any answer. That request is sent once more on a new connection,
 * and only then: never after an answer began, never on a fresh connection, never twice.
 */
export function post(url: string, headers: Record<string, string>, body: string, signal: AbortSignal, retried = false): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const t = target(url);
    let answered = false;
    headers['content-length'] = String(Buffer.byteLength(body));
    const req = t.mod.request({ ...t.options, method: 'POST', headers, agent: t.agent, signal }, (res) => {
      answered = true;
      resolve(res);
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (!answered && !retried && req.reusedSocket && !signal.aborted && STALE_CONNECTION.has(e.code ?? '')) resolve(post(url, headers, body, signal, true));
      else reject(e);
    });
    req.end(body);
  });
}

export class ProviderClient {
  constructor(private readonly timeoutMs: number) {}

  private request(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal, stream: boolean): Promise<IncomingMessage> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: stream ? 'text/event-stream' : 'application/json' };
    if (p.apiKey) headers.authorization = `Bearer ${p.apiKey}`;
    return post(p.baseUrl + path, headers, JSON.stringify(body), signal);
  }

  /** A non-streamed call: the parsed JSON answer, or a mapped error. */
  async json(p: ProviderConfig, path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const who = `Provider ${p.name}`;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error('upstream time limit')), this.timeoutMs);
    const onAbort = () => ac.abort(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const res = await this.request(p, path, body, ac.signal, false);
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await readBody(res), who);
      const text = await readText(res);
      try {
        return JSON.parse(text);
      } catch {
        throw new ServiceError('upstream_error', `${who} answered something other than JSON`);
      }
    } catch (e) {
      if (e instanceof ServiceError) throw e;
      if (signal.aborted) throw e;
      if (ac.signal.aborted) throw timeoutError(who, this.timeoutMs);
      throw upstreamHttpError(0, null, who);
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
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
    let res: IncomingMessage;
    try {
      res = await this.request(p, path, body, ac.signal, true);
      const status = res.statusCode ?? 0;
      if (status < 200 || status >= 300) throw upstreamHttpError(status, await readBody(res), who);
    } catch (e) {
      cleanup();
      if (e instanceof ServiceError) throw e;
      if (timedOut) throw timeoutError(who, this.timeoutMs);
      if (signal.aborted) throw e;
      throw upstreamHttpError(0, null, who);
    }
    const source = res as AsyncIterable<Buffer>;
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
