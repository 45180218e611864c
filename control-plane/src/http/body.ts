import type { FastifyInstance, FastifyRequest } from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { ServiceError, sha256Hex } from '@svc/shared';
import { bodyTooLarge } from './errors.ts';
import { discardRest } from './unread-body.ts';

/** Anything that can say whether a payload digest is on the admin denylist (kept in memory, refreshed on NOTIFY). */
export interface DenylistCheck {
  has(sha256: string): boolean;
}

function screen(req: FastifyRequest, digest: string, deny: DenylistCheck): void {
  req.bodySha256 = digest;
  if (deny.has(digest)) throw new ServiceError('payload_denied', 'This payload has been refused by the operator');
}

/**
 * A body read by its route as it arrives (config.streamBody): screened as `screen` does once its last byte
 * is hashed, and cut off at the route's bodyLimit. The route sees a refusal as an error from the iterable.
 */
async function* screened(req: FastifyRequest, payload: Readable, deny: DenylistCheck, limit: number): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  let bytes = 0;
  let whole = false;
  try {
    // Not destroyed when the route stops reading (a bad line): that would take the socket, and the answer with it.
    for await (const piece of payload.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      bytes += piece.length;
      if (bytes > limit) throw bodyTooLarge(req);
      hash.update(piece);
      yield piece;
    }
    whole = true;
  } finally {
    // The rest of a body its route stopped reading (node drains only a body nobody began to read; one left
    // paused half way stalls the client), up to the route's own limit.
    if (!whole) discardRest(payload, limit);
  }
  screen(req, hash.digest('hex'), deny);
}

/**
 * How deep a JSON body may nest (the top-level object or array is level 1). Deeper documents are refused as
 * they arrive: validating, canonicalizing or echoing them recurses once per level, past the stack's end.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether `v` nests objects or arrays more than `levels` deep; recurses at most `levels` calls deep. */
export function nestsDeeper(v: unknown, levels = MAX_JSON_DEPTH): boolean {
  if (typeof v !== 'object' || v === null) return false;
  if (levels === 0) return true;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x: unknown = v[i];
      if (typeof x === 'object' && x !== null && nestsDeeper(x, levels - 1)) return true;
    }
    return false;
  }
  for (const k in v) {
    const x: unknown = (v as Record<string, unknown>)[k];
    if (typeof x === 'object' && x !== null && nestsDeeper(x, levels - 1)) return true;
  }
  return false;
}

/**
 * Body parsing: every body is hashed as received and refused when its sha256 is denylisted, whatever
 * the route. A request for no route is not parsed: it answers the 404 of an unknown route, whatever its
 * Content-Type or body. JSON is parsed here with a clear 400; other types arrive as raw Buffers for the routes that take them,
 * and multipart/form-data as it arrives for the routes that read it so (config.streamBody).
 */
export function registerBodyParsers(app: FastifyInstance, deny: DenylistCheck): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json(\s*;.*)?$/i, { parseAs: 'buffer' }, (req, raw: Buffer, done) => {
    if (req.is404) return done(null, undefined); // no such route: its 404, whatever the body
    try {
      screen(req, sha256Hex(raw), deny);
      if (req.routeOptions.config?.rawBody) return done(null, raw); // a raw-bytes route keeps JSON files as bytes
      if (raw.length === 0) return done(null, undefined);
      const body: unknown = JSON.parse(raw.toString('utf8'));
      if (nestsDeeper(body)) throw new ServiceError('invalid_json', `Body nests deeper than ${MAX_JSON_DEPTH} levels of objects and arrays`);
      done(null, body);
    } catch (e) {
      if (e instanceof ServiceError) return done(e);
      done(new ServiceError('invalid_json', `Body is not valid JSON: ${(e as Error).message}`));
    }
  });
  app.addContentTypeParser(/^multipart\/form-data(\s*;.*)?$/i, (req, payload, done) => {
    if (req.is404) return done(null, undefined);
    const config = req.routeOptions.config;
    if (!config?.streamBody) {
      return done(new ServiceError('unsupported_media_type', config?.rawBody ? 'This route takes the bytes as the body, not multipart/form-data' : 'This route takes application/json, not multipart/form-data'));
    }
    const limit = req.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit ?? Infinity;
    if (Number(req.headers['content-length']) > limit) return done(bodyTooLarge(req));
    done(null, screened(req, payload, deny, limit));
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, raw: Buffer, done) => {
    if (req.is404) return done(null, undefined);
    try {
      screen(req, sha256Hex(raw), deny);
      if (!req.routeOptions.config?.rawBody) {
        throw new ServiceError('unsupported_media_type', `This route takes application/json, not ${req.headers['content-type']}`);
      }
      done(null, raw);
    } catch (e) {
      done(e as Error);
    }
  });
}

/**
 * The zod validator of each request part, where a request without a body may leave out a body its route takes
 * as optional (`.optional()` or `.default({})`): Fastify validates a missing body as `null`, which an optional
 * object refuses, so `null` is read as no body where the schema takes none, and as itself where it takes `null`.
 */
export const requestValidator: typeof validatorCompiler = (route) => {
  const check = validatorCompiler(route);
  if (route.httpPart !== 'body') return check;
  const refused = (r: ReturnType<typeof check>) => typeof r === 'object' && r !== null && 'error' in r && r.error !== undefined;
  return (data) => {
    const r = check(data);
    if (data !== null || !refused(r)) return r;
    const absent = check(undefined);
    return refused(absent) ? r : absent;
  };
};
