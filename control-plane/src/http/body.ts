import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, sha256Hex } from '@svc/shared';

/** Anything that can say whether a payload digest is on the admin denylist (kept in memory, refreshed on NOTIFY). */
export interface DenylistCheck {
  has(sha256: string): boolean;
}

function screen(req: FastifyRequest, raw: Buffer, deny: DenylistCheck): void {
  const digest = sha256Hex(raw);
  req.bodySha256 = digest;
  if (deny.has(digest)) throw new ServiceError('payload_denied', 'This payload has been refused by the operator');
}

/**
 * Body parsing: every body is hashed as received and refused when its sha256 is denylisted, whatever
 * the route. JSON is parsed here with a clear 400; other types arrive as raw Buffers for the routes that take them.
 */
export function registerBodyParsers(app: FastifyInstance, deny: DenylistCheck): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json(\s*;.*)?$/i, { parseAs: 'buffer' }, (req, raw: Buffer, done) => {
    try {
      screen(req, raw, deny);
      if (req.routeOptions.config?.rawBody) return done(null, raw); // a raw-bytes route keeps JSON files as bytes
      if (raw.length === 0) return done(null, undefined);
      done(null, JSON.parse(raw.toString('utf8')));
    } catch (e) {
      if (e instanceof ServiceError) return done(e);
      done(new ServiceError('invalid_json', `Body is not valid JSON: ${(e as Error).message}`));
    }
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, raw: Buffer, done) => {
    try {
      screen(req, raw, deny);
      if (!req.routeOptions.config?.rawBody) {
        throw new ServiceError('unsupported_media_type', `This route takes application/json, not ${req.headers['content-type']}`);
      }
      done(null, raw);
    } catch (e) {
      done(e as Error);
    }
  });
}
