import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CHANNEL_PATH, ServiceError } from '@svc/shared';

const kUpgrade = Symbol('svc.upgrade');
const kRouting = Symbol('svc.upgrade-routing');

/** The connection of a WebSocket upgrade request, for the route that takes it over. */
export interface Upgrade {
  socket: Duplex;
  head: Buffer;
  /** Set once a route took the connection over (it is not closed after the answer then). */
  taken: boolean;
}

type WithUpgrade = IncomingMessage & { [kUpgrade]?: Upgrade };

/**
 * WebSocket routes are Fastify routes. An upgrade request (other than the agent channel's, which
 * fleet/channel.ts takes) is routed like any request: its hooks run (auth, scopes, the error envelope), and a
 * route that speaks WebSocket takes the connection over (`takeUpgrade`, then `reply.hijack()` and the `ws`
 * server's handleUpgrade). Any other answer (a refusal, a route that does not speak WebSocket, an unknown path)
 * is written to the connection as a plain HTTP answer, and the connection closes after it. Installed once per
 * server, by the first route module that needs it.
 */
export function routeUpgrades(app: FastifyInstance): void {
  const server = app.server as typeof app.server & { [kRouting]?: true };
  if (server[kRouting]) return;
  server[kRouting] = true;
  server.on('upgrade', (req: WithUpgrade, socket: Duplex, head: Buffer) => {
    if ((req.url ?? '').split('?')[0] === CHANNEL_PATH) return;
    const up: Upgrade = { socket, head, taken: false };
    req[kUpgrade] = up;
    socket.on('error', () => undefined);
    const res = new ServerResponse(req);
    res.assignSocket(socket as Socket);
    res.on('finish', () => {
      if (!up.taken) socket.end();
    });
    try {
      app.routing(req, res);
    } catch (e) {
      app.log.warn({ err: e }, 'an upgrade request could not be routed');
      socket.destroy();
    }
  });
}

/** Whether the request came as a WebSocket upgrade. */
export function isUpgrade(req: FastifyRequest): boolean {
  return (req.raw as WithUpgrade)[kUpgrade] !== undefined && String(req.headers.upgrade ?? '').toLowerCase() === 'websocket';
}

/** The request's upgrade; a request that is not one is a 426. */
export function upgradeOf(req: FastifyRequest): Upgrade {
  const up = (req.raw as WithUpgrade)[kUpgrade];
  if (!up || !isUpgrade(req)) {
    throw new ServiceError('invalid_request', `${req.routeOptions.url} speaks WebSocket: send the request as a WebSocket upgrade (Upgrade: websocket)`, {}, 426);
  }
  return up;
}

/** The route takes the connection over: the reply is hijacked, and nothing else writes to the connection. */
export function takeUpgrade(up: Upgrade, reply: FastifyReply): void {
  up.taken = true;
  reply.hijack();
  reply.raw.detachSocket(up.socket as Socket);
}
