import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { IncomingMessage } from 'node:http';
import { redactUrl } from './log-redaction.ts';

/**
 * One log line per request, written when its response is over (for a stream, when the stream is): method,
 * path (path tokens redacted), status, duration, the request id (pino's `reqId`), the error envelope's type when
 * it answered one, and for a server-sent-events stream how it ended: `completed`, `caller_gone` (the caller
 * closed the connection first), `upstream_broke` (the upstream failed mid-answer) or `failed` (another error
 * after the stream began). Fastify's own two lines per request are off (`disableRequestLogging`).
 */
export type StreamEnd = 'completed' | 'caller_gone' | 'upstream_broke' | 'failed';

const streamErrors = new WeakMap<IncomingMessage, string>();

/** A stream that began sent this error event: its request line says how the stream ended, and the error's type. */
export function noteStreamError(req: FastifyRequest, type: string): void {
  if (!streamErrors.has(req.raw)) streamErrors.set(req.raw, type);
}

const UPSTREAM = new Set(['upstream_error', 'upstream_timeout']);
const ENVELOPE_TYPE = /^\{"error":\{"type":"([a-z0-9_]{1,64})"/;

export function registerRequestLog(app: FastifyInstance): void {
  const errorTypes = new WeakMap<IncomingMessage, string>();
  app.addHook('onSend', (req, reply, payload, done) => {
    if (reply.statusCode >= 400 && typeof payload === 'string') {
      const m = ENVELOPE_TYPE.exec(payload);
      if (m) errorTypes.set(req.raw, m[1]!);
    }
    done(null, payload);
  });
  app.addHook('onRequest', (req, reply, done) => {
    const res = reply.raw;
    res.once('close', () => {
      const status = res.statusCode;
      const ms = Math.round(reply.elapsedTime * 10) / 10;
      const fields: Record<string, unknown> = { method: req.method, path: redactUrl(req.url), status, duration_ms: ms };
      const streamed = String(res.getHeader('content-type') ?? '').startsWith('text/event-stream');
      const streamError = streamErrors.get(req.raw);
      const errorType = errorTypes.get(req.raw) ?? streamError;
      if (errorType) fields.error_type = errorType;
      if (streamed) fields.stream = !res.writableEnded ? 'caller_gone' : streamError ? (UPSTREAM.has(streamError) ? 'upstream_broke' : 'failed') : 'completed';
      const line = `${req.method} ${fields.path as string} ${status} ${ms} ms${errorType ? ` ${errorType}` : ''}${streamed ? ` (stream ${fields.stream as string})` : ''}`;
      if (status >= 500) req.log.error(fields, line);
      else if (fields.stream === 'upstream_broke' || fields.stream === 'failed') req.log.warn(fields, line);
      else req.log.info(fields, line);
    });
    done();
  });
}
