import type { FastifyReply, FastifyRequest } from 'fastify';
import { isJsonContentType } from '@modelcontextprotocol/sdk/shared/mediaType.js';
import { ServiceError } from '@svc/shared';

/** JSON-RPC 2.0 error codes, and the MCP transport's own (-32000 family). */
export const RPC = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  /** The SDK's code for transport-level refusals (method not allowed, not acceptable). */
  transport: -32000,
  /** An unknown or expired session (the transport answers it with 404). */
  sessionNotFound: -32001,
  /** The upstream MCP server failed: unreachable, timed out, or answered something that is not MCP. */
  upstream: -32002,
} as const;

export type RpcId = string | number | null;

/** One JSON-RPC message, as far as routing it needs. */
export interface RpcMessage {
  jsonrpc: '2.0';
  id?: string | number;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: unknown;
}

/**
 * A refusal answered as a JSON-RPC error response with an HTTP status. `data.type` is the gateway's stable
 * error type (the `type` of its error envelope) and `data.request_id` the request's id.
 */
export class RpcFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: number,
    message: string,
    readonly type: string,
    readonly id: RpcId = null,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }

  static from(e: ServiceError, id: RpcId, code: number = RPC.invalidRequest): RpcFailure {
    return new RpcFailure(e.status, e.status >= 500 ? RPC.internalError : code, e.message, e.type, id, e.extra);
  }
}

export const isRequest = (m: RpcMessage): m is RpcMessage & { id: string | number; method: string } => typeof m.method === 'string' && m.id !== undefined;

const validId = (v: unknown) => v === undefined || typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v));

/**
 * Parses one JSON-RPC message from a request body. Refused with a JSON-RPC error (never an HTTP 500): a body
 * that is not JSON (-32700), a batch (the 2025-06-18 transport has none), or anything that is not a single
 * JSON-RPC 2.0 request, notification or response (-32600).
 */
export function parseMessage(raw: Buffer | undefined): RpcMessage {
  let v: unknown;
  try {
    v = JSON.parse(raw?.toString('utf8') ?? '');
  } catch {
    throw new RpcFailure(400, RPC.parseError, 'Parse error: the body is not JSON', 'invalid_json');
  }
  if (Array.isArray(v)) throw new RpcFailure(400, RPC.invalidRequest, 'Invalid Request: JSON-RPC batches are not supported; send one message per request', 'invalid_request');
  if (!v || typeof v !== 'object') throw new RpcFailure(400, RPC.invalidRequest, 'Invalid Request: the body must be one JSON-RPC 2.0 message (an object)', 'invalid_request');
  const m = v as Record<string, unknown>;
  const id = validId(m.id) ? (m.id as string | number | undefined) : undefined;
  const fail = (why: string) => new RpcFailure(400, RPC.invalidRequest, `Invalid Request: ${why}`, 'invalid_request', id ?? null);
  if (m.jsonrpc !== '2.0') throw fail('jsonrpc must be "2.0"');
  if (!validId(m.id) || m.id === null) throw fail('id must be a string or a number');
  if (m.method !== undefined) {
    if (typeof m.method !== 'string' || m.method.length === 0 || m.method.length > 256) throw fail('method must be a non-empty string');
    if (m.params !== undefined && (typeof m.params !== 'object' || m.params === null || Array.isArray(m.params))) throw fail('params must be an object');
    if (m.result !== undefined || m.error !== undefined) throw fail('a request carries no result or error');
  } else {
    if (m.id === undefined) throw fail('a message needs a method, or an id with a result or error');
    if ((m.result === undefined) === (m.error === undefined)) throw fail('a response carries exactly one of result and error');
  }
  return m as unknown as RpcMessage;
}

/**
 * The Streamable HTTP transport's header rules for a POST, the same on both MCP routes (and as the SDK's
 * server transport words them): the client accepts both application/json and text/event-stream (406
 * otherwise) and sends application/json (415 otherwise). Checked before the body is looked at.
 */
export function transportRefusal(req: FastifyRequest): RpcFailure | null {
  const accept = req.headers.accept ?? '';
  if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
    return new RpcFailure(406, RPC.transport, 'Not Acceptable: Client must accept both application/json and text/event-stream', 'not_acceptable');
  }
  if (!isJsonContentType(req.headers['content-type'])) return new RpcFailure(415, RPC.transport, 'Unsupported Media Type: Content-Type must be application/json', 'unsupported_media_type');
  return null;
}

/**
 * A tools/call is a request: one without an id (a notification) could run a tool that nothing checks,
 * meters or answers, so it is refused (400, the transport's answer to a notification it does not accept).
 */
export function assertCallable(m: RpcMessage): void {
  if (m.method === 'tools/call' && m.id === undefined) {
    throw new RpcFailure(400, RPC.invalidRequest, 'Invalid Request: tools/call is a request and needs an id; it is never accepted as a notification', 'invalid_request');
  }
}

/** The JSON-RPC error response of a failure. */
export function errorBody(f: RpcFailure, requestId: string) {
  return { jsonrpc: '2.0' as const, id: f.id, error: { code: f.code, message: f.message, data: { type: f.type, ...f.extra, request_id: requestId } } };
}

/** Answers a failure: its status, the JSON-RPC error body, nothing cached. */
export function sendFailure(reply: FastifyReply, f: RpcFailure): FastifyReply {
  if (f.status === 405) reply.header('allow', 'POST, DELETE');
  return reply.code(f.status).header('cache-control', 'no-store').type('application/json').send(JSON.stringify(errorBody(f, reply.request.id)));
}

/** Converts anything thrown while serving an MCP request into a failure; 5xx never leaks internals. */
export function asFailure(e: unknown, id: RpcId): RpcFailure {
  if (e instanceof RpcFailure) return e;
  if (e instanceof ServiceError) return RpcFailure.from(e, id);
  return new RpcFailure(500, RPC.internalError, 'Internal error; quote the request_id when reporting it', 'internal_error', id);
}

/** The session refusal of the transport: 404 with a JSON-RPC error, so the client initializes again. */
export const sessionNotFound = (id: RpcId) => new RpcFailure(404, RPC.sessionNotFound, 'Session not found: initialize a new session', 'not_found', id);
