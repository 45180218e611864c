import type { FastifyReply, FastifyRequest } from 'fastify';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ServiceError, type SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import { requireKey } from '../../http/auth.ts';
import { assertRouteAllowed } from '../../http/key-bounds.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { RPC, RpcFailure, asFailure, assertCallable, parseMessage, sendFailure, sessionNotFound, transportRefusal, type RpcMessage } from './jsonrpc.ts';
import { CallerAnswer } from './proxy-io.ts';
import { assertParams, succeeded } from './requests.ts';
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
 * request. Sessions (stateful mode) are rows checked here before the transport runs: an initialize that
 * succeeds opens one and answers its id in Mcp-Session-Id; a request naming an unknown, expired or another
 * key's session is 404 with a JSON-RPC error; a request without one (other than initialize) is served
 * without a session. Answers are JSON; a streaming tool called with a progressToken turns its answer into an
 * SSE stream at its first piece of progress, so a call refused before it runs (a 402) is still plain JSON.
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
    const refused = transportRefusal(req);
    if (refused) return sendFailure(reply, refused);
    let msg: RpcMessage;
    try {
      msg = parseMessage(req.body as Buffer | undefined);
      assertCallable(msg);
    } catch (e) {
      return sendFailure(reply, asFailure(e, null));
    }
    const id = msg.id ?? null;
    const answer = new CallerAnswer(reply);
    try {
      const p = requireKey(req);
      const initialize = msg.method === 'initialize';
      const given = req.headers[SESSION_HEADER];
      if (!initialize && typeof given === 'string' && this.d.sessions.stateful && !(await this.d.sessions.use(p, given))) throw sessionNotFound(id);
      assertParams(msg);
      const tool = msg.method === 'tools/call' ? this.d.tools.get(String(msg.params?.name)) : undefined;
      const token = (msg.params?._meta as { progressToken?: unknown } | undefined)?.progressToken;
      // A streaming tool's progress opens the SSE answer at its first piece: a call refused or failed before
      // it runs (a 402, a bad argument) is answered as JSON, before any stream opens.
      const notify = tool?.streams === true && (typeof token === 'string' || typeof token === 'number') ? (n: object) => (answer.begin(), answer.relay({ event: 'message', id: null, data: JSON.stringify(n) })) : null;
      let receipt: SignedReceipt | undefined;
      const res = await this.serve(req, p, msg, notify, (r) => (receipt = r));
      if (res.status === 202 || !res.body) return reply.code(res.status).header('cache-control', 'no-store').send();
      const text = await res.text();
      if (receipt && !answer.streaming) setReceiptHeaders(reply, receipt); // a JSON answer carries its receipt in the headers too
      if (initialize && this.d.sessions.stateful && res.status === 200 && succeeded(text)) {
        // Only an initialize that succeeded opens a session (one that failed would end the key's oldest for nothing).
        const version = typeof msg.params?.protocolVersion === 'string' ? msg.params.protocolVersion.slice(0, 32) : null;
        reply.header(SESSION_HEADER, await this.d.sessions.open(p, version));
      }
      return answer.send(text, res.status);
    } catch (e) {
      return answer.fail(asFailure(e, id));
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

  /**
   * Runs the message through a fresh McpServer on a stateless web-standard transport answering JSON; a
   * streaming tool's progress goes out through `notify` meanwhile. The call runs to its end whether or not
   * its caller stays (the transport's revisions up to 2025-11-25 say a disconnect is not a cancellation):
   * what ran is settled and receipted, so leaving mid-call never avoids the charge.
   */
  private async serve(req: FastifyRequest, p: KeyPrincipal, msg: RpcMessage, notify: ((n: object) => void) | null, receipted: (r: SignedReceipt) => void): Promise<Response> {
    const sdk = await this.loadSdk();
    const server = this.build(sdk, req, p, notify, receipted);
    const transport = new sdk.Transport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    try {
      await server.connect(transport);
      const headers = new Headers();
      for (const h of PASSED_HEADERS) {
        const v = req.headers[h];
        if (typeof v === 'string') headers.set(h, v);
      }
      return await transport.handleRequest(new Request(this.resource, { method: 'POST', headers }), { parsedBody: msg });
    } finally {
      void server.close().catch(() => undefined);
    }
  }

  private build(sdk: Awaited<ReturnType<RemoteMcpServer['loadSdk']>>, req: FastifyRequest, p: KeyPrincipal, notify: ((n: object) => void) | null, receipted: (r: SignedReceipt) => void): McpServer {
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
        (async (args: Record<string, unknown>, extra: { signal: AbortSignal; _meta?: { progressToken?: string | number } }) => {
          const token = extra._meta?.progressToken;
          let n = 0;
          const progress = token !== undefined && notify ? (message: string) => notify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: ++n, message } }) : null;
          return this.call(tool, args, { ...base, signal: extra.signal, progress }, receipted);
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
}
