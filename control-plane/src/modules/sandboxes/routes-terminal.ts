import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { WebSocketServer } from 'ws';
import { z } from 'zod';
import { requireKey } from '../../http/auth.ts';
import { runIdOf } from '../../http/run-id.ts';
import { isUpgrade, routeUpgrades, upgradeOf, takeUpgrade } from '../../http/upgrade.ts';
import type { SandboxDeps } from './deps.ts';
import { MAX_CALLER_FRAME } from './terminal-link.ts';

const DESCRIPTION = `A WebSocket (send the GET as an upgrade; a plain GET is 426). The terminal runs a shell (bash where the image has it, else sh) under a TTY in the session's container, for as long as the connection stays open, metered per second as an exec is (held for the wall-clock limit, charged for the seconds it was open; a 402 comes before the upgrade).

Caller to gateway: binary frames are keystrokes (raw bytes, at most 64 KiB a frame); text frames are JSON, {"type":"resize","cols":C,"rows":R} or {"type":"signal","name":"INT"|"QUIT"|"TSTP"|"HUP"|"TERM"|"KILL"} (INT, QUIT, TSTP as the terminal's control characters; HUP, TERM, KILL sent to the shell's process group). Any other text frame closes the connection (1008).

Gateway to caller: a text frame {"type":"ready", ...limits} first, then binary frames of screen output, and at the end a text frame {"type":"exit","code","reason":"exited"|"closed"|"idle"|"timed_out","duration_ms","cost_micro_usd","receipt"} and close 1000, or {"type":"error","error":{type,message}} and close 1011.

A browser, which cannot set headers on a WebSocket, offers the subprotocols "svc.terminal" and "svc.key.<sk-svc_ key>"; the answer selects "svc.terminal".

Closing the connection kills the terminal's processes. A terminal with neither input nor output for the idle limit is closed (reason idle); one open past the wall-clock limit is killed (reason timed_out). A session has at most a few terminals open at once (409, reason terminal_limit). Screen output a slow caller does not read holds the terminal's program back; input past a window of 64 KiB not yet taken by the terminal pauses the caller's connection.`;

/** The subprotocol a browser offers with its key (`svc.key.<sk-svc_...>`): the terminal's frames of DESCRIPTION. */
export const TERMINAL_PROTOCOL = 'svc.terminal';

const Query = z.object({
  cols: z.coerce.number().int().min(1).max(1000).default(80).describe('Initial width in columns'),
  rows: z.coerce.number().int().min(1).max(1000).default(24).describe('Initial height in rows'),
});

/** The interactive terminal of a session: `GET /v1/sandboxes/sessions/:id/terminal` as a WebSocket (SessionTerminals). */
export function sessionTerminalRoutes(app: FastifyInstance, d: SandboxDeps): void {
  routeUpgrades(app);
  // A client that offers subprotocols (a browser, whose key comes as one: http/auth.ts) gets `svc.terminal` back, never the key's.
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_CALLER_FRAME, perMessageDeflate: false, handleProtocols: (offered) => (offered.has(TERMINAL_PROTOCOL) ? TERMINAL_PROTOCOL : false) });
  wss.on('headers', (headers: string[], req: IncomingMessage) => {
    const id = (req as IncomingMessage & { svcRequestId?: string }).svcRequestId;
    if (id) headers.push(`x-request-id: ${id}`);
  });
  app.addHook('preClose', async () => {
    d.terminals.stop();
    for (const c of wss.clients) c.terminate();
  });
  const cfg = d.config.sessionTerminals;

  app.withTypeProvider<ZodTypeProvider>().get(
    '/v1/sandboxes/sessions/:id/terminal',
    {
      config: { auth: 'key', scope: 'sandboxes', billable: true },
      schema: {
        tags: ['sandboxes'],
        summary: 'An interactive terminal into the session over WebSocket: keystrokes, resizes and signals in, screen output out; metered per second',
        description: DESCRIPTION,
        params: z.object({ id: z.string().max(64) }),
        querystring: Query,
        response: { 101: z.null().describe('Switching Protocols: the WebSocket') },
      },
    },
    async (req, reply) => {
      const p = requireKey(req);
      if (!isUpgrade(req)) {
        await d.sessions.live(p.accountId, req.params.id); // a missing or stopped session says so first
        upgradeOf(req); // 426
      }
      const up = upgradeOf(req);
      let gone = false;
      const onGone = () => (gone = true);
      up.socket.once('close', onGone);
      const link = await d.terminals.start(p, req.params.id, req.query, { requestId: req.id, runId: runIdOf(req) });
      takeUpgrade(up, reply);
      up.socket.off('close', onGone);
      if (gone || up.socket.destroyed) return void link.callerGone();
      const onClose = () => link.callerGone();
      up.socket.once('close', onClose);
      (req.raw as IncomingMessage & { svcRequestId?: string }).svcRequestId = req.id;
      wss.handleUpgrade(req.raw, up.socket, up.head, (ws) => {
        up.socket.off('close', onClose);
        link.attach(ws, { session_id: req.params.id, request_id: req.id, cols: req.query.cols, rows: req.query.rows, idle_seconds: cfg.idleSeconds, max_seconds: cfg.maxSeconds });
      });
    },
  );
}
