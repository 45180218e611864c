import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import { Refused, outboundLookup } from '../webhooks/outbound.ts';
import type { SelfAddress } from '../webhooks/url.ts';

/**
 * Connections to upstream MCP servers, under the outbound rules of webhooks (webhooks/outbound.ts): never this
 * gateway itself (whatever name or address leads there), only public addresses unless
 * SVC_WEBHOOK_ALLOW_PRIVATE is on, names resolved on every new connection and the connection made to exactly
 * the addresses checked (DNS rebinding), redirects never followed. Sockets are kept alive between calls (a
 * reused socket stays on the address it was checked on).
 */

/** Why an exchange with the upstream failed; `kind` picks the error type the caller sees. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: 'refused' | 'unreachable' | 'timeout' | 'garbage' | 'status',
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

/**
 * An idle socket is retired before its server closes it: Node applies a server's `Keep-Alive: timeout=N` hint
 * (less a second) only to an agent that has a timeout of its own, and without one a call could go out on a
 * socket the server closes that instant (ECONNRESET, a failed call). The timeout also retires idle sockets
 * of servers that send no hint; a socket in use is bounded by each exchange's own time limit.
 */
const IDLE_SOCKET_MS = 30_000;
const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, scheduling: 'lifo', timeout: IDLE_SOCKET_MS }),
  https: new https.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, scheduling: 'lifo', timeout: IDLE_SOCKET_MS }),
};

/**
 * The URL may be dialed: http(s), and what the URL itself shows passes the outbound rules (not this
 * gateway, not a private address literal unless allowed). Returns the lookup its connections make.
 */
export function assertDialable(url: URL, self: SelfAddress): ReturnType<typeof outboundLookup> {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UpstreamFailure('refused', 'refused: the upstream URL is not http(s)');
  try {
    return outboundLookup(url, self);
  } catch (e) {
    throw new UpstreamFailure('refused', (e as Error).message); // outboundLookup refuses with Refused only
  }
}

export interface DialRequest {
  method: 'POST' | 'GET' | 'DELETE';
  headers: Record<string, string>;
  body?: Buffer | string;
  signal: AbortSignal;
}

/** One HTTP exchange with the upstream; resolves with the response once its headers arrived. */
export function dial(url: URL, r: DialRequest, self: SelfAddress): Promise<IncomingMessage> {
  let lookup: ReturnType<typeof outboundLookup>;
  try {
    lookup = assertDialable(url, self);
  } catch (e) {
    return Promise.reject(e);
  }
  return new Promise((resolve, reject) => {
    const secure = url.protocol === 'https:';
    const headers = r.body === undefined ? r.headers : { ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) };
    const req = (secure ? https : http).request(url, {
      method: r.method,
      headers,
      agent: secure ? agents.https : agents.http,
      lookup,
      signal: r.signal,
    });
    req.once('response', resolve);
    req.once('error', (e) => reject(failureOf(e, r.signal)));
    req.end(r.body);
  });
}

/** A transport error as what the caller is told: refused, timed out or unreachable. */
export function failureOf(e: unknown, signal: AbortSignal): UpstreamFailure {
  if (e instanceof UpstreamFailure) return e;
  if (e instanceof Refused) return new UpstreamFailure('refused', e.message);
  if (signal.aborted) return new UpstreamFailure('timeout', String((signal.reason as Error | undefined)?.message ?? 'the exchange was cut off'));
  const code = (e as NodeJS.ErrnoException).code;
  return new UpstreamFailure('unreachable', `the upstream could not be reached${code ? ` (${code})` : ''}`);
}

/** Reads a whole body, at most `max` bytes (past it: garbage). */
export async function readAll(res: IncomingMessage, max: number, signal: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const c of res as AsyncIterable<Buffer>) {
      n += c.length;
      if (n > max) {
        res.destroy();
        throw new UpstreamFailure('garbage', `the upstream answered more than ${max} bytes`);
      }
      chunks.push(c);
    }
  } catch (e) {
    throw failureOf(e, signal);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** A fetch for the MCP SDK's client transport over `dial`: the same rules, no redirects. */
export function guardedFetch(self: SelfAddress, timeoutMs: number) {
  return async (input: string | URL, init?: RequestInit): Promise<Response> => {
    const url = new URL(String(input));
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => (headers[k] = v));
    const method = (init?.method ?? 'GET').toUpperCase() as DialRequest['method'];
    const signal = init?.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
    const body = typeof init?.body === 'string' ? init.body : undefined;
    const res = await dial(url, { method, headers, signal, ...(body !== undefined ? { body } : {}) }, self);
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') out.set(k, v);
    const empty = res.statusCode === 204 || res.statusCode === 304 || method === 'DELETE';
    if (empty) res.resume();
    return new Response(empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), { status: res.statusCode ?? 502, headers: out });
  };
}
