import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { MCP_RESOURCE_PATH } from '../oauth/metadata.ts';
import { RPC, RpcFailure, sendFailure } from './jsonrpc.ts';
import type { McpGateway } from './proxy.ts';
import { Deleted, IdParams, JSONRPC_MESSAGE, Probe, RpcAnswer, ServerInput, ServerList, ServerPatch, ServerView } from './schemas.ts';
import { RemoteMcpServer } from './server.ts';
import type { McpServersService } from './service.ts';
import type { McpSessions } from './sessions.ts';
import type { ToolRegistry } from './tools/registry.ts';

export interface McpRouteDeps {
  servers: McpServersService;
  gateway: McpGateway;
  tools: ToolRegistry;
  sessions: McpSessions;
  publicUrl: URL;
  version: string;
}

/** MCP bodies are read by the routes themselves: a JSON-RPC error, never the envelope, answers a bad one. */
const MCP_BODY_LIMIT = 4 * 1024 * 1024;

/**
 * RFC 9728 §5.1 and the MCP authorization spec: a 401 names the protected resource metadata, so a stock MCP
 * client finds the authorization server by itself, and the scopes it needs (`mcp` and those of the tools, not
 * every scope the metadata lists); a token that lacks the `mcp` scope is told which it needs.
 */
function challenge(metadataUrl: string, scopes: string) {
  return (_req: FastifyRequest, reply: FastifyReply, payload: unknown, done: HookHandlerDoneFunction & ((e: Error | null, p?: unknown) => void)) => {
    const status = reply.statusCode;
    if (status === 401) {
      const invalid = typeof payload === 'string' && payload.includes('"type":"invalid_credential"');
      reply.header('www-authenticate', `Bearer resource_metadata="${metadataUrl}", scope="${scopes}"${invalid ? ', error="invalid_token"' : ''}`);
    } else if (status === 403 && typeof payload === 'string' && payload.includes('"type":"insufficient_scope"')) {
      reply.header('www-authenticate', `Bearer error="insufficient_scope", scope="mcp", resource_metadata="${metadataUrl}"`);
    }
    done(null, payload);
  };
}

/** The remote MCP server, the MCP gateway, and registrations of third-party MCP servers. */
export function mcpRoutes(app: FastifyInstance, d: McpRouteDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const metadataUrl = new URL(`/.well-known/oauth-protected-resource${MCP_RESOURCE_PATH}`, d.publicUrl).toString();
  const onSend = challenge(metadataUrl, d.tools.scopes().join(' ')) as never; // /v1/mcp: mcp and its tools' scopes
  const onSendGateway = challenge(metadataUrl, 'mcp') as never;
  const remote = new RemoteMcpServer({ tools: d.tools, sessions: d.sessions, publicUrl: d.publicUrl, version: d.version, log: app.log });
  const tags = ['mcp'];
  const key = { auth: 'key' as const, scope: 'mcp' as const };
  const rpcBody = { contentType: 'application/json', schema: JSONRPC_MESSAGE as unknown as Record<string, unknown> };
  const notAllowed = async (_req: FastifyRequest, reply: FastifyReply) =>
    void sendFailure(reply, new RpcFailure(405, RPC.transport, 'Method not allowed: this endpoint offers no server-initiated event stream; POST messages (answers may stream as SSE)', 'method_not_allowed'));
  const noStream = { 405: RpcAnswer.describe('A JSON-RPC error; Allow: POST, DELETE.') };

  r.post(
    '/v1/mcp',
    {
      config: { ...key, billable: true, rawBody: true, documentedBody: rpcBody },
      bodyLimit: MCP_BODY_LIMIT,
      onSend,
      schema: {
        tags,
        summary: 'Remote MCP server (Streamable HTTP): tools chat, run_code and verify_receipt, each call metered and receipted under your key',
        description:
          'JSON-RPC over POST, one message per request. Stateful deployments answer initialize with an Mcp-Session-Id that later requests carry (an unknown or expired one is 404 with a JSON-RPC error; initialize again); requests without one are served without a session. ' +
          'Without credentials: 401 with WWW-Authenticate naming the protected resource metadata, where OAuth clients find the authorization server. ' +
          'A tool that fails, or a 402, is a tool result with isError (a 402\'s payment terms in structuredContent.error).',
        headers: z.object({ 'mcp-session-id': z.string().max(1024).optional(), 'mcp-protocol-version': z.string().max(32).optional() }),
        response: { 200: RpcAnswer, 202: z.null().describe('A notification or response was accepted.') },
      },
    },
    async (req, reply) => void (await remote.post(req, reply)),
  );

  r.get('/v1/mcp', { config: key, onSend, schema: { tags, summary: 'The transport\'s event stream for server-initiated messages: not offered (405)', response: noStream } }, notAllowed);

  r.delete(
    '/v1/mcp',
    {
      config: key,
      onSend,
      schema: {
        tags,
        summary: 'End the session named by Mcp-Session-Id (404 when it is unknown, expired or another key\'s; 405 on stateless deployments)',
        headers: z.object({ 'mcp-session-id': z.string().max(1024).optional() }),
        response: { 200: z.null(), ...noStream },
      },
    },
    async (req, reply) => void (await remote.end(req, reply)),
  );

  r.post(
    '/v1/mcp/servers/:id',
    {
      config: { ...key, billable: true, rawBody: true, documentedBody: rpcBody },
      bodyLimit: MCP_BODY_LIMIT,
      onSend: onSendGateway,
      schema: {
        tags,
        summary: 'Passthrough MCP session to a registered server: tools/list filtered and each tools/call checked by its allow list before the upstream is dialed, metered as an mcp_call event and receipted',
        description:
          'Messages reach the upstream unchanged, with the gateway\'s credential for it attached. A tools/call outside the allow list is refused (-32602) and never reaches the upstream; an upstream that fails, hangs past the deployment\'s timeout or answers garbage is a JSON-RPC error (-32002) and nothing is charged. ' +
          'The receipt attests server id, tool name, sha256 of the canonical arguments and of the result, duration and outcome, never content. Unknown, disabled and other accounts\' servers are 404.',
        params: IdParams,
        headers: z.object({ 'mcp-session-id': z.string().max(1024).optional(), 'mcp-protocol-version': z.string().max(32).optional() }),
        response: { 200: RpcAnswer, 202: z.null().describe('A notification or response was accepted by the upstream.') },
      },
    },
    async (req, reply) => void (await d.gateway.post(req, reply, req.params.id)),
  );

  r.get('/v1/mcp/servers/:id', { config: key, onSend: onSendGateway, schema: { tags, summary: 'The transport\'s event stream for server-initiated messages: not relayed (405)', params: IdParams, response: noStream } }, notAllowed);

  r.delete(
    '/v1/mcp/servers/:id',
    {
      config: key,
      onSend: onSendGateway,
      schema: {
        tags,
        summary: 'End the upstream session named by Mcp-Session-Id (the upstream\'s answer: 200, 404, or 405 when it does not let clients end sessions)',
        params: IdParams,
        headers: z.object({ 'mcp-session-id': z.string().max(1024).optional() }),
        response: { 200: z.null(), ...noStream },
      },
    },
    async (req, reply) => void (await d.gateway.end(req, reply, req.params.id)),
  );

  // Registrations (session).
  const mtags = ['mcp'];
  const session = { auth: 'session' as const };

  r.post(
    '/v1/mcp-servers',
    { config: session, schema: { tags: mtags, summary: 'Register a third-party MCP server; its URL and credential are sealed and never returned', body: ServerInput, response: { 201: ServerView } } },
    async (req, reply) => reply.code(201).send(await d.servers.create(requireSession(req).accountId, req.body)),
  );

  r.get(
    '/v1/mcp-servers',
    { config: session, schema: { tags: mtags, summary: 'Your registered MCP servers with their proxy URLs, allow lists, prices and gates (the full set)', response: { 200: ServerList } } },
    async (req) => d.servers.list(requireSession(req).accountId),
  );

  r.patch(
    '/v1/mcp-servers/:id',
    { config: session, schema: { tags: mtags, summary: 'Edit name, url, credential, tool allow list, per-call price or the enabled gate', params: IdParams, body: ServerPatch, response: { 200: ServerView } } },
    async (req) => d.servers.update(requireSession(req).accountId, req.params.id, req.body),
  );

  r.delete(
    '/v1/mcp-servers/:id',
    { config: session, schema: { tags: mtags, summary: 'Deregister: the sealed URL and credential are destroyed', params: IdParams, response: { 200: Deleted } } },
    async (req) => d.servers.remove(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/mcp-servers/:id/test',
    { config: session, schema: { tags: mtags, summary: 'Probe the server: initialize and tools/list through the outbound rules; answers tool names only', params: IdParams, response: { 200: Probe } } },
    async (req) => d.servers.test(requireSession(req).accountId, req.params.id),
  );
}
