import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { initTRPC, TRPCError } from '@trpc/server';
import { applyWSSHandler } from '@trpc/server/adapters/ws';
import { WebSocketServer } from 'ws';
import { CHANNEL_PATH, ConnectionParams, Hello, JobFinish, JobOutput, JobOutputs, MAX_CHANNEL_MESSAGE_BYTES, PROTOCOL_VERSION, ServiceError } from '@svc/shared';
import type { AgentHub } from './hub.ts';
import type { NodeRegistry } from './registry.ts';

interface ChannelContext {
  nodeId: string | null;
  /** Why this connection is refused; every call answers with it, so the agent reads the reason. */
  refusal: TRPCError | null;
  /** The agent's number for this connection (ConnectionParams.connection); null from agents that send none. */
  connection: number | null;
}

const t = initTRPC.context<ChannelContext>().create();
const agentProcedure = t.procedure.use(({ ctx, next }) => {
  if (ctx.refusal || !ctx.nodeId) throw ctx.refusal ?? new TRPCError({ code: 'UNAUTHORIZED', message: 'no node key' });
  return next({ ctx: { nodeId: ctx.nodeId, connection: ctx.connection } });
});

function makeRouter(hub: AgentHub) {
  return t.router({
    hello: agentProcedure.input(Hello).mutation(async ({ ctx, input }) => {
      const answer = await hub.hello(ctx.nodeId, input.running_jobs, ctx.connection);
      // The sessions it no longer holds are lost; a failure here is logged, the connection goes on.
      if (input.sessions) await hub.sessionsHeld?.(ctx.nodeId, input.sessions).catch((e: unknown) => hub.log.error({ err: e, node_id: ctx.nodeId }, 'could not record the sessions an agent holds'));
      return { node_id: ctx.nodeId, protocol_version: PROTOCOL_VERSION, ...answer };
    }),
    jobs: agentProcedure.subscription(async function* ({ ctx, signal }) {
      const conn = hub.attach(ctx.nodeId, ctx.connection);
      try {
        yield* conn.queue.iterate(signal);
      } finally {
        hub.detach(conn);
      }
    }),
    output: agentProcedure.input(JobOutput).mutation(async ({ ctx, input }) => {
      await hub.onOutputs(ctx.nodeId, [input], ctx.connection);
      return { ok: true };
    }),
    outputs: agentProcedure.input(JobOutputs).mutation(async ({ ctx, input }) => {
      await hub.onOutputs(ctx.nodeId, input, ctx.connection);
      return { ok: true };
    }),
    finish: agentProcedure.input(JobFinish).mutation(async ({ ctx, input }) => {
      await hub.onFinish(ctx.nodeId, input, ctx.connection);
      return { ok: true };
    }),
  });
}

export type AgentRouter = ReturnType<typeof makeRouter>;

/**
 * The agent channel: agents dial WebSocket `/v1/nodes/channel` and speak tRPC. The first message carries
 * connection params (node key, protocol version, agent version); a wrong key or another protocol version
 * is refused with a message the operator can act on. The credential never rides in the URL.
 */
export function attachAgentChannel(app: FastifyInstance, hub: AgentHub, registry: NodeRegistry): () => Promise<void> {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_CHANNEL_MESSAGE_BYTES });
  const handler = applyWSSHandler({
    wss,
    router: makeRouter(hub),
    keepAlive: { enabled: true, pingMs: 20_000, pongWaitMs: 10_000 },
    createContext: async ({ info, res }): Promise<ChannelContext> => {
      const refuse = (code: 'UNAUTHORIZED' | 'FORBIDDEN' | 'PRECONDITION_FAILED', message: string) => ({ nodeId: null, refusal: new TRPCError({ code, message }), connection: null });
      const parsed = ConnectionParams.safeParse(info.connectionParams ?? {});
      if (!parsed.success) return refuse('UNAUTHORIZED', 'connection params must carry node_key, protocol_version and agent_version');
      if (parsed.data.protocol_version !== PROTOCOL_VERSION) {
        return refuse(
          'PRECONDITION_FAILED',
          `agent protocol version ${parsed.data.protocol_version} is not supported: this control plane speaks version ${PROTOCOL_VERSION}; install the matching agent release`,
        );
      }
      try {
        const node = await registry.authenticate(parsed.data.node_key);
        return { nodeId: node.nodeId, refusal: null, connection: parsed.data.connection ?? null };
      } catch (e) {
        if (e instanceof ServiceError && e.type === 'account_suspended') {
          // Refused for now, not for good: close the connection once the refusal is answered, so the agent
          // dials again with its backoff and is judged afresh (a connection's context is made once).
          setTimeout(() => res.close(4403, 'owner account suspended'), 250).unref();
          return refuse('FORBIDDEN', e.message);
        }
        return refuse('UNAUTHORIZED', e instanceof ServiceError ? e.message : 'node key refused');
      }
    },
  });
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const path = (req.url ?? '').split('?')[0];
    if (path !== CHANNEL_PATH) {
      // Other upgrades go through the app's router (http/upgrade.ts); with none there, nothing answers them.
      if (app.server.listenerCount('upgrade') === 1) socket.destroy();
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  };
  app.server.on('upgrade', onUpgrade);
  return async () => {
    // The upgrade handler stays while the HTTP server still accepts: an agent that dials in during the stop is
    // answered 503 by the closed WebSocket server and its connection ends (with no handler its socket would
    // stay open, and the HTTP server's close would wait for it forever).
    handler.broadcastReconnectNotification();
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((r) => wss.close(() => r()));
  };
}
