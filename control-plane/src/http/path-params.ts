import type { FastifyInstance } from 'fastify';
import { ServiceError } from '@svc/shared';

/**
 * No path parameter carries a NUL character: Postgres stores none in text, file systems and programs take
 * none, so every route would otherwise fail on one wherever it first reaches them (a 500 where a route
 * answers its own errors). Refused before any route or authentication runs, with a 400 naming the parameter
 * (the wildcard by the name the OpenAPI document gives it, `path`).
 */
export function refuseNulInPathParams(app: FastifyInstance): void {
  app.addHook('onRequest', (req, _reply, done) => {
    const params = req.params as Record<string, unknown> | undefined;
    for (const k in params) {
      const v = params[k];
      if (typeof v === 'string' && v.includes('\0')) {
        const param = k === '*' ? 'path' : k;
        return done(new ServiceError('invalid_request', `params.${param}: contains a NUL character (\\u0000), which this API does not accept`, { param }));
      }
    }
    done();
  });
}
