import type { IncomingMessage } from 'node:http';
import type { FastifyReply } from 'fastify';
import { SseStream } from '../../http/sse.ts';
import { RPC, RpcFailure, errorBody, sendFailure, sessionNotFound, type RpcId } from './jsonrpc.ts';
import { readSse, type SseEvent } from './sse-read.ts';
import { UpstreamFailure, failureOf, readAll } from './upstream.ts';

/** The most of an upstream answer (a JSON body, or one SSE event) the gateway reads. */
export const MAX_UPSTREAM_BYTES = 8 * 1024 * 1024;

/** The caller's side of one exchange: a JSON answer, or an SSE stream begun when the upstream streams. */
export class CallerAnswer {
  private sse: SseStream | null = null;
  constructor(readonly reply: FastifyReply) {}

  get streaming(): boolean {
    return this.sse !== null;
  }

  /**
   * Begins the SSE answer (the Mcp-Session-Id header, if any, already set on the raw response); not for a
   * caller already gone (its stream would never see the close that ends it).
   */
  begin(): void {
    if (!this.sse && !this.reply.raw.destroyed) this.sse = new SseStream(this.reply);
  }

  /** An event relayed as it came (notifications, and requests of the server to the client). */
  relay(e: SseEvent): void {
    this.sse?.send(e.data, { event: e.event ?? 'message', ...(e.id !== null ? { id: e.id } : {}) });
  }

  /** The final answer: a JSON-RPC message, as JSON or as the stream's last event. */
  send(message: unknown, status = 200): FastifyReply {
    const text = typeof message === 'string' ? message : JSON.stringify(message);
    if (!this.sse) return this.reply.code(status).header('cache-control', 'no-store').type('application/json').send(text);
    this.sse.send(text, { event: 'message' });
    this.sse.close();
    return this.reply;
  }

  /** Ends a stream whose upstream closed it after relaying everything. */
  end(): FastifyReply {
    this.sse?.close();
    return this.reply;
  }

  fail(f: RpcFailure): FastifyReply {
    if (!this.sse) return sendFailure(this.reply, f);
    return this.send(errorBody(f, this.reply.request.id));
  }
}

/** What a request to the upstream answered, once its status was checked. */
export type UpstreamAnswer =
  | { kind: 'accepted' }
  | { kind: 'json'; text: string; message: Record<string, unknown> }
  | { kind: 'sse'; events: AsyncGenerator<SseEvent> };

const jsonType = (t: string | undefined) => /^application\/([\w.+-]+\+)?json\b/i.test(t ?? '');
const sseType = (t: string | undefined) => /^text\/event-stream\b/i.test(t ?? '');

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Checks an upstream response and opens its body. A 404 to a request that named a session is the caller's
 * 404 (the session is gone upstream: initialize again); a 4xx with a JSON-RPC error body is the upstream's
 * answer, passed on with its status; anything else that is not a 2xx JSON or SSE answer is a failure.
 */
export async function answerOf(res: IncomingMessage, id: RpcId, hadSession: boolean, signal: AbortSignal): Promise<UpstreamAnswer | { kind: 'refusal'; status: number; text: string }> {
  const status = res.statusCode ?? 0;
  const type = res.headers['content-type'];
  if (status === 202 || (status >= 200 && status < 300 && res.headers['content-length'] === '0')) {
    res.resume();
    return { kind: 'accepted' };
  }
  if (status >= 200 && status < 300) {
    if (sseType(type)) return { kind: 'sse', events: guarded(readSse(res as AsyncIterable<Buffer>, MAX_UPSTREAM_BYTES), signal) };
    if (!jsonType(type)) {
      res.resume();
      throw new UpstreamFailure('garbage', `the upstream answered ${String(type ?? 'no content type').slice(0, 60)}, not JSON or an event stream`);
    }
    const text = (await readAll(res, MAX_UPSTREAM_BYTES, signal)).toString('utf8');
    const message = parseObject(text);
    if (!message || message.jsonrpc !== '2.0') throw new UpstreamFailure('garbage', 'the upstream answered something that is not a JSON-RPC message');
    return { kind: 'json', text, message };
  }
  if (status === 404 && hadSession) {
    res.resume();
    throw sessionNotFound(id);
  }
  if (status === 401 || status === 403 || status === 407) {
    res.resume();
    throw new UpstreamFailure('status', `the upstream refused the gateway's credential for it (HTTP ${status}); its owner can change the credential`);
  }
  if (status >= 300 && status < 400) {
    res.resume();
    throw new UpstreamFailure('status', `the upstream answered a redirect (HTTP ${status}), which the gateway does not follow`);
  }
  if (status >= 400 && status < 500 && jsonType(type)) {
    const text = (await readAll(res, MAX_UPSTREAM_BYTES, signal)).toString('utf8');
    const m = parseObject(text);
    if (m?.jsonrpc === '2.0' && m.error && typeof m.error === 'object') return { kind: 'refusal', status, text };
  } else res.resume();
  throw new UpstreamFailure('status', `the upstream failed (HTTP ${status})`);
}

/** Upstream read failures as UpstreamFailures (a timeout named as one). */
async function* guarded(events: AsyncGenerator<SseEvent>, signal: AbortSignal): AsyncGenerator<SseEvent> {
  try {
    yield* events;
  } catch (e) {
    if (signal.aborted) throw failureOf(e, signal);
    throw new UpstreamFailure('garbage', `the upstream's event stream broke: ${(e as Error).message}`);
  }
}

/** A JSON-RPC message of an SSE event (null for anything else: a priming event, a comment-only event). */
export function eventMessage(e: SseEvent): Record<string, unknown> | null {
  if (e.event !== null && e.event !== 'message') return null;
  const m = parseObject(e.data);
  return m?.jsonrpc === '2.0' ? m : null;
}

/** Whether a message is the response to the request `id`. */
export const answers = (m: Record<string, unknown>, id: RpcId) => m.id === id && m.method === undefined && ('result' in m || 'error' in m);

/** An upstream failure as the caller's JSON-RPC error: what happened, never the upstream's address. */
export function upstreamFailure(e: UpstreamFailure, id: RpcId): RpcFailure {
  const status = id === null ? (e.kind === 'timeout' ? 504 : 502) : 200;
  if (e.kind === 'timeout') return new RpcFailure(status, RPC.upstream, 'The MCP server did not answer in time', 'upstream_timeout', id);
  if (e.kind === 'refused') return new RpcFailure(status, RPC.upstream, 'The MCP server\'s address is refused by the gateway\'s outbound rules (a private address, or the gateway itself)', 'upstream_error', id);
  return new RpcFailure(status, RPC.upstream, `The MCP server failed: ${e.message}`, 'upstream_error', id);
}
