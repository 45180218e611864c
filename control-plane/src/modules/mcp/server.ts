import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ServiceError, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { requireKey } from '../../http/auth.ts';
import { callerGone } from '../../http/caller-signal.ts';
import { assertRouteAllowed } from '../../http/key-bounds.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { RPC, RpcFailure, asFailure, parseMessage, sendFailure, sessionNotFound, type RpcMessage } from './jsonrpc.ts';
import { receiptMeta } from './receipt-meta.ts';
import type { McpSessions } from './sessions.ts';
import type { McpTool, ToolContext, ToolRegistry } from './tools/registry.ts';

export const MCP_ROUTE = 'POST /v1/mcp';
const SESSION_HEADER = 'mcp-session-id';
/** Headers of the caller's request the SDK transport reads. */
const PASSED_HEADERS = ['accept', 'content-type', 'mcp-protocol-version'] as const;

export interface RemoteServerDeps {
  tools: ToolRegistry;
  sessions: McpSessions;
  publicUrl: URL;
  version: string;
  log: { error(o: object, msg: string): void };
}

/** A refused or failed tool call as MCP tool error: the gateway's error type, message and extra fields (a 402's payment terms). */
export function toolError(e: unknown, requestId: string, log: RemoteServerDeps['log']): CallToolResult {
  const err = e instanceof ServiceError ? e : null;
  if (!err) log.error({ err: e, request_id: requestId }, 'MCP tool failed');
  const error = err ? { type: err.type, message: err.message, ...err.extra, request_id: requestId } : { type: 'internal_error', message: 'Internal error; quote the request_id when reporting it', request_id: requestId };
  return { isError: true, content: [{ type: 'text', text: `${error.type}: ${error.message}` }], structuredContent: { error } };
}

/**
 * The gateway's remote MCP server at /v1/mcp: the SDK's McpServer on its Streamable HTTP transport (web
 * standard flavour), one server and one stateless transport per HTTP request, so any process answers any
 * request. Sessions (stateful mode) are rows checked here before the transport runs: initialize opens one
 * and answers its id in Mcp-Session-Id; a request naming an unknown, expired or another key's session is
 * 404 with a JSON-RPC error; a request without one (other than initialize) is served without a session.
 * Answers are JSON, or SSE for a streaming tool called with a progressToken.
 */
export class RemoteMcpServer {
  readonly resource: string;
  /**
   * The MCP SDK's server side, loaded with the first request that reaches it (a gateway serving no MCP never
   * loads it), and one JSON Schema validator for every per-request server (building one costs milliseconds).
   */
  private sdk: Promise<{ McpServer: typeof McpServer; Transport: typeof import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js').WebStandardStreamableHTTPServerTransport; validator: AjvJsonSchemaValidator }> | null = null;

  private loadSdk() {
    this.sdk ??= Promise.all([
      import('@modelcontextprotocol/sdk/server/mcp.js'),
      import('@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'),
      import('@modelcontextprotocol/sdk/validation/ajv'),
    ]).then(([mcp, http, ajv]) => ({ McpServer: mcp.McpServer, Transport: http.WebStandardStreamableHTTPServerTransport, validator: new ajv.AjvJsonSchemaValidator() }));
    return this.sdk;
  }

  constructor(private readonly d: RemoteServerDeps) {
    this.resource = new URL('/v1/mcp', d.publicUrl).toString();
  }

  async post(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    let msg: RpcMessage;
    try {
      msg = parseMessage(req.body as Buffer | undefined);
    } catch (e) {
      return sendFailure(reply, asFailure(e, null));
    }
    const id = msg.id ?? null;
    try {
      const p = requireKey(req);
      const initialize = msg.method === 'initialize';
      const given = req.headers[SESSION_HEADER];
      if (!initialize && typeof given === 'string' && this.d.sessions.stateful && !(await this.d.sessions.use(p, given))) throw sessionNotFound(id);
      const tool = msg.method === 'tools/call' ? this.d.tools.get(String(msg.params?.name)) : undefined;
      const meta = msg.params?._meta as { progressToken?: unknown } | undefined;
      const streaming = tool?.streams === true && meta?.progressToken !== undefined;
      let receipt: SignedReceipt | undefined;
      const res = await this.serve(req, reply, p, msg, streaming, (r) => (receipt = r));
      if (receipt && !streaming) setReceiptHeaders(reply, receipt); // a JSON answer carries its receipt in the headers too
      if (initialize && res.status === 200 && this.d.sessions.stateful) {
        const version = typeof msg.params?.protocolVersion === 'string' ? msg.params.protocolVersion.slice(0, 32) : null;
        reply.header(SESSION_HEADER, await this.d.sessions.open(p, version));
      }
      return await this.send(reply, res);
    } catch (e) {
      return sendFailure(reply, asFailure(e, id));
    }
  }

  /** DELETE /v1/mcp: ends the session named by Mcp-Session-Id (stateless deployments answer 405). */
  async end(req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    if (!this.d.sessions.stateful) return sendFailure(reply, new RpcFailure(405, RPC.transport, 'Method not allowed: this server keeps no sessions', 'method_not_allowed'));
    const given = req.headers[SESSION_HEADER];
    if (typeof given !== 'string') return sendFailure(reply, new RpcFailure(400, RPC.transport, 'Bad Request: Mcp-Session-Id header is required', 'invalid_request'));
    if (!(await this.d.sessions.close(requireKey(req), given))) return sendFailure(reply, sessionNotFound(null));
    return reply.code(200).send();
  }

  /** Runs the message through a fresh McpServer on a stateless web-standard transport. */
  private async serve(req: FastifyRequest, reply: FastifyReply, p: KeyPrincipal, msg: RpcMessage, streaming: boolean, receipted: (r: SignedReceipt) => void): Promise<Response> {
    const sdk = await this.loadSdk();
    const abort = new AbortController();
    const gone = callerGone(reply.raw);
    const onGone = () => abort.abort(gone.reason);
    gone.addEventListener('abort', onGone, { once: true });
    const server = this.build(sdk, req, p, abort.signal, receipted);
    const transport = new sdk.Transport({ sessionIdGenerator: undefined, enableJsonResponse: !streaming });
    const cleanup = () => {
      gone.removeEventListener('abort', onGone);
      void server.close().catch(() => undefined);
    };
    reply.raw.once('close', cleanup);
    await server.connect(transport);
    const headers = new Headers();
    for (const h of PASSED_HEADERS) {
      const v = req.headers[h];
      if (typeof v === 'string') headers.set(h, v);
    }
    return transport.handleRequest(new Request(this.resource, { method: 'POST', headers }), { parsedBody: msg });
  }

  private build(sdk: Awaited<ReturnType<RemoteMcpServer['loadSdk']>>, req: FastifyRequest, p: KeyPrincipal, signal: AbortSignal, receipted: (r: SignedReceipt) => void): McpServer {
    const server = new sdk.McpServer(
      { name: 'svc-gateway', title: 'svc gateway', version: this.d.version },
      {
        capabilities: { tools: {} },
        jsonSchemaValidator: sdk.validator,
        instructions: 'Tools of the svc gateway. Every call is metered under your API key; the signed receipt of a call is in its result\'s _meta ("svc/receipt").',
      },
    );
    const base = { principal: p, requestId: req.id, runId: runIdOf(req), resource: this.resource, route: MCP_ROUTE };
    for (const tool of this.d.tools.list()) {
      server.registerTool(
        tool.name,
        { title: tool.title, description: tool.description, inputSchema: tool.inputSchema, ...(tool.annotations ? { annotations: tool.annotations } : {}) },
        (async (args: Record<string, unknown>, extra: { signal: AbortSignal; _meta?: { progressToken?: string | number }; sendNotification: (n: never) => Promise<void> }) => {
          const token = extra._meta?.progressToken;
          let n = 0;
          const progress =
            token !== undefined && tool.streams
              ? (message: string) => void extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: ++n, message } } as never).catch(() => undefined)
              : null;
          return this.call(tool, args, { ...base, signal: AbortSignal.any([signal, extra.signal]), progress }, receipted);
        }) as never,
      );
    }
    return server;
  }

  /** One metered tool call: its answer with the receipt in `_meta`, or its refusal as a tool error. */
  private async call(tool: McpTool, args: Record<string, unknown>, ctx: ToolContext, receipted: (r: SignedReceipt) => void): Promise<CallToolResult> {
    try {
      if (tool.scope && !ctx.principal.scopes.includes(tool.scope)) {
        throw new ServiceError('insufficient_scope', `The ${tool.name} tool needs the "${tool.scope}" scope beside "mcp"; this API key or token lacks it`, { required_scope: tool.scope });
      }
      if (tool.route) assertRouteAllowed(ctx.principal, tool.route.method, tool.route.url); // a mandate's route allow list
      const a = await tool.run(args, ctx);
      receipted(a.receipt);
      return {
        content: a.content,
        ...(a.structuredContent ? { structuredContent: a.structuredContent } : {}),
        ...(a.isError ? { isError: true } : {}),
        _meta: receiptMeta(a.receipt),
      };
    } catch (e) {
      return toolError(e, ctx.requestId, this.d.log);
    }
  }

  /** Sends the transport's answer: its status and content type, JSON as text, SSE as it is written. */
  private async send(reply: FastifyReply, res: Response): Promise<FastifyReply> {
    reply.code(res.status).header('cache-control', 'no-store');
    const type = res.headers.get('content-type');
    if (type) reply.type(type);
    if (res.status === 405) reply.header('allow', 'POST, DELETE');
    if (!res.body) return reply.send();
    if (type?.startsWith('text/event-stream')) return reply.header('x-accel-buffering', 'no').send(Readable.fromWeb(res.body as never));
    return reply.send(await res.text());
  }
}
