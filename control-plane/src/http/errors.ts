import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { maxHeaderSize, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { ServiceError, type ErrorBody } from '@svc/shared';
import { ISSUE_STATUS } from './fields.ts';
import { closeAfterAnswer } from './unread-body.ts';

/**
 * The uniform answer for unknown routes and unmounted groups (admin and metrics without their tokens, passkeys
 * without their settings): same status and body either way. Everything that answers "no such route" throws
 * this one.
 */
export function routeNotFound(req: FastifyRequest): ServiceError {
  return new ServiceError('not_found', `Route ${req.method} ${req.url.split('?')[0]} not found`);
}

/** The router's limit on one path parameter (a longer one is answered 414). */
export const MAX_PARAM_LENGTH = 500;

/** How long a connection whose request could not be parsed stays open after its answer. */
const LINGER_MS = 2000;

export interface ErrorHandlingOptions {
  /** How much of a refused request's unread body is read and dropped so its client gets the answer (SVC_BODY_DRAIN_BYTES). */
  drainBytes: number;
}

function sendError(reply: FastifyReply, err: ServiceError, o: ErrorHandlingOptions): FastifyReply {
  const body: ErrorBody = { error: { type: err.type, message: err.message, ...err.extra, request_id: reply.request.id } };
  // Also when an earlier onRequest hook (auth) refused the request before the one that sets it ran.
  reply.header('x-request-id', reply.request.id);
  // Refused before its body all arrived (too large, wrong type, unauthenticated): the connection stays open
  // while the rest is read and dropped, unless the rest is declared past the drain cap.
  const raw = reply.request.raw;
  if (!raw.complete) {
    if (closeAfterAnswer(raw, o.drainBytes)) reply.header('connection', 'close');
    else reply.removeHeader('connection');
  }
  if ((err.status === 429 || err.status === 503) && typeof err.extra.retry_after === 'number') reply.header('retry-after', String(err.extra.retry_after));
  return reply.code(err.status).type('application/json; charset=utf-8').send(body);
}

/**
 * The name of a route's trailing wildcard (`/files/*`) in the OpenAPI document and in errors: `path` (the spec
 * writes it `*path`), never the router's own `*`.
 */
export const WILDCARD_PARAM = 'path';

type Issue = {
  path?: PropertyKey[];
  message: string;
  keys?: string[];
  instancePath?: string;
  params?: { keys?: string[]; issue?: { path?: PropertyKey[]; message?: string; keys?: string[] }; params?: Record<string, unknown> };
};

function describeIssue(context: string | undefined, issue: Issue): { message: string; param: string } {
  const fromPointer = (issue.instancePath ?? '').split('/').filter(Boolean).map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  // An unknown field (a strict object's unrecognized key) is named itself, not its object.
  const unknown = issue.params?.issue?.keys ?? issue.params?.keys ?? issue.keys;
  const path = [...(issue.params?.issue?.path ?? issue.path ?? fromPointer), ...(unknown?.length ? [unknown[0]!] : [])];
  if (context === 'params' && path[0] === '*') path[0] = WILDCARD_PARAM;
  const param = path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
  const where = context ?? 'request';
  const msg = issue.params?.issue?.message ?? issue.message;
  return { message: param ? `${where}.${param}: ${msg}` : `${where}: ${msg}`, param };
}

/** Postgres refusing a NUL character: in text (22021, invalid byte sequence 0x00) or in jsonb (22P05, \u0000). */
function isNulRefusal(e: unknown): boolean {
  for (let x = e as { code?: unknown; cause?: unknown } | undefined, i = 0; x && i < 3; x = x.cause as typeof x, i++) {
    if (x.code === '22021' || x.code === '22P05') return true;
  }
  return false;
}

/** Where the request carries a NUL character: the first path-parameter, query or body string (or key) with one. */
function nulPath(req: FastifyRequest): { context: string; param: string } | null {
  const find = (v: unknown, path: string, depth: number): string | null => {
    if (typeof v === 'string') return v.includes('\0') ? path : null;
    if (!v || typeof v !== 'object' || Buffer.isBuffer(v) || depth > 32) return null;
    for (const [k, x] of Object.entries(v)) {
      const here = Array.isArray(v) ? `${path}[${k}]` : path ? `${path}.${k}` : k;
      if (k.includes('\0')) return here;
      const found = find(x, here, depth + 1);
      if (found) return found;
    }
    return null;
  };
  for (const [context, value] of [['params', req.params], ['querystring', req.query], ['body', req.body]] as const) {
    const param = find(value, '', 0);
    if (param) return { context, param: context === 'params' && param === '*' ? WILDCARD_PARAM : param };
  }
  return null;
}

/** The 413 of a body past its route's limit (with the route's hint of what to send instead). */
export function bodyTooLarge(req: FastifyRequest): ServiceError {
  const hint = req.routeOptions.config?.tooLargeHint;
  return new ServiceError('payload_too_large', `Request body exceeds the limit of ${req.routeOptions.bodyLimit ?? 'the route'} bytes${hint ? `; ${hint}` : ''}`);
}

/**
 * Maps every error to the envelope. 5xx never leaks internals: the message is generic, the log has the cause.
 * `frameworkErrors` and `clientError` are Fastify options (the router's refusals of a URL before any route
 * runs, and node's refusals of a request it could not parse); `register` installs the rest on the app.
 */
export function errorHandling(o: ErrorHandlingOptions & { newRequestId: () => string }) {
  const send = (reply: FastifyReply, err: ServiceError) => sendError(reply, err, o);
  return {
    frameworkErrors: (error: FastifyError, _req: FastifyRequest, reply: FastifyReply) => send(reply, frameworkError(error)),
    clientError(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Duplex) {
      answerUnparsed(this, error, socket, o.newRequestId());
    },
    register: (app: FastifyInstance) => registerHandlers(app, send),
  };
}

/** The router's refusals: a URL that does not decode, a path parameter past the router's length limit. */
function frameworkError(error: FastifyError): ServiceError {
  if (error.code === 'FST_ERR_BAD_URL') return new ServiceError('invalid_request', 'The URL path holds an invalid percent-encoding');
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') return new ServiceError('invalid_request', `A path parameter is longer than ${MAX_PARAM_LENGTH} characters`, {}, 414);
  const status = typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  return status < 500 ? new ServiceError('invalid_request', error.message, {}, status) : new ServiceError('internal_error', 'Internal error; quote the request_id when reporting it');
}

/**
 * What a client is told when node cannot parse its request (no route ran): the envelope, then the connection
 * closes. It lingers a moment first (what else arrives is dropped): closing on unread bytes would reset the
 * connection, and a reset can destroy the answer before the client reads it.
 */
function answerUnparsed(app: FastifyInstance, error: NodeJS.ErrnoException, socket: Duplex, requestId: string): void {
  if (error.code === 'ECONNRESET' || socket.destroyed || socket.writableEnded) return;
  const [status, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, `The request line and headers exceed ${maxHeaderSize} bytes (a URL that long is not served)`]
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'The request did not arrive in time']
        : [400, 'Malformed HTTP request'];
  app.log.debug({ err: error, request_id: requestId }, 'unparsable request');
  if (socket.writable) {
    const body = JSON.stringify({ error: { type: 'invalid_request', message, request_id: requestId } } satisfies ErrorBody);
    const head = `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nx-request-id: ${requestId}\r\nconnection: close\r\n\r\n`;
    socket.end(head + body);
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  } else socket.destroy();
}

function registerHandlers(app: FastifyInstance, send: (reply: FastifyReply, err: ServiceError) => FastifyReply): void {
  app.setNotFoundHandler((req, reply) => send(reply, routeNotFound(req)));

  app.setErrorHandler((error: FastifyError | ServiceError | Error, req, reply) => {
    if (error instanceof ServiceError) return send(reply, error);
    const fe = error as FastifyError;
    if (hasZodFastifySchemaValidationErrors(fe)) {
      const first = fe.validation[0] as unknown as Issue;
      const d = describeIssue(fe.validationContext, first);
      const marked = first.params?.params;
      if (marked?.[ISSUE_STATUS] === 413) return send(reply, new ServiceError('payload_too_large', d.message, { param: d.param, limit_bytes: marked.limit_bytes }));
      return send(reply, new ServiceError('invalid_request', d.message, d.param ? { param: d.param } : {}));
    }
    if (fe.validation) {
      const first = fe.validation[0] as unknown as Issue | undefined;
      const d = first ? describeIssue(fe.validationContext, first) : { message: fe.message, param: '' };
      return send(reply, new ServiceError('invalid_request', d.message, d.param ? { param: d.param } : {}));
    }
    switch (fe.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return send(reply, bodyTooLarge(req));
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return send(reply, new ServiceError('unsupported_media_type', `Unsupported Content-Type: ${req.headers['content-type'] ?? '(none)'}`));
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return send(reply, new ServiceError('invalid_json', 'Content-Type is application/json but the body is empty'));
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return send(reply, new ServiceError('invalid_request', 'Content-Length does not match the body'));
    }
    if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
      return send(reply, new ServiceError('invalid_request', fe.message, {}, fe.statusCode));
    }
    // Postgres stores no NUL character in text or jsonb: a 400 when the request carried it (the write rolled
    // back); one from elsewhere (an upstream's answer) stays ours, a 500.
    const at = isNulRefusal(error) ? nulPath(req) : null;
    if (at) return send(reply, new ServiceError('invalid_request', `${at.context}.${at.param}: contains a NUL character (\\u0000), which this API does not accept`, { param: at.param }));
    if (isResponseSerializationError(error)) req.log.error({ err: error, issues: error.cause.issues }, 'response failed its schema');
    else req.log.error({ err: error }, 'unhandled error');
    return send(reply, new ServiceError('internal_error', 'Internal error; quote the request_id when reporting it'));
  });
}
