import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

/**
 * A real MCP server (the SDK's McpServer on its Node Streamable HTTP transport) on a loopback port, standing
 * in for a third-party server behind the gateway. It records every HTTP request (method, JSON-RPC method,
 * the Authorization header it got, the session id) and every tool call. Tools: `echo` (text back),
 * `add` (two numbers; structured), `secret` (kept off allow lists), `fail` (a tool error), `count` (streams
 * progress notifications when asked). Beside /mcp: /hang never answers, /garbage answers HTML, /refuse answers
 * every request with a JSON-RPC error.
 */
export interface McpUpstream {
  url: string;
  /** /hang and /garbage on the same server. */
  hangUrl: string;
  garbageUrl: string;
  /** Answers every request with a JSON-RPC error. */
  refuseUrl: string;
  requests: Array<{ httpMethod: string; rpcMethod: string | null; authorization: string | undefined; apiKey: string | undefined; sessionId: string | undefined; headers: IncomingMessage['headers'] }>;
  calls: Array<{ tool: string; args: unknown }>;
  /** Sessions the server holds now (stateful mode). */
  sessions(): number;
  reset(): void;
  close(): Promise<void>;
}

export interface McpUpstreamOptions {
  /** stateful: sessions with ids (one transport per session); stateless: a server and a transport per request. */
  mode: 'stateful' | 'stateless';
  /** Answer requests with JSON rather than SSE streams. */
  json: boolean;
  /** More tools, beside the five above (a test's own, such as one that waits for it). */
  extraTools?: (server: McpServer, calls: McpUpstream['calls']) => void;
}

function tools(server: McpServer, calls: McpUpstream['calls'], extra?: McpUpstreamOptions['extraTools']): McpServer {
  extra?.(server, calls);
  server.registerTool('echo', { description: 'Echo a text back', inputSchema: { text: z.string() } }, async ({ text }) => {
    calls.push({ tool: 'echo', args: { text } });
    return { content: [{ type: 'text', text: `echo: ${text}` }] };
  });
  server.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() }, outputSchema: { sum: z.number() } }, async ({ a, b }) => {
    calls.push({ tool: 'add', args: { a, b } });
    return { content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } };
  });
  server.registerTool('secret', { description: 'A tool the gateway must not let through', inputSchema: {} }, async () => {
    calls.push({ tool: 'secret', args: {} });
    return { content: [{ type: 'text', text: 'the secret' }] };
  });
  server.registerTool('fail', { description: 'Always fails as a tool', inputSchema: {} }, async () => {
    calls.push({ tool: 'fail', args: {} });
    return { isError: true, content: [{ type: 'text', text: 'it failed' }] };
  });
  server.registerTool('count', { description: 'Count to n, with progress', inputSchema: { n: z.number().int().min(1).max(10) } }, async ({ n }, extra) => {
    calls.push({ tool: 'count', args: { n } });
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= n; i++) if (token !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: n } });
    return { content: [{ type: 'text', text: `counted to ${n}` }] };
  });
  return server;
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : undefined;
}

export async function startMcpUpstream(opts: McpUpstreamOptions): Promise<McpUpstream> {
  const requests: McpUpstream['requests'] = [];
  const calls: McpUpstream['calls'] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const hanging = new Set<ServerResponse>();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/hang') {
      hanging.add(res);
      req.resume();
      return;
    }
    if (path === '/refuse') {
      // Answers every request with a JSON-RPC error, as a server that refuses a call at the protocol level.
      const msg = (await readJson(req)) as { id?: unknown; method?: string };
      requests.push({ httpMethod: req.method ?? '', rpcMethod: msg?.method ?? null, authorization: req.headers.authorization, apiKey: undefined, sessionId: undefined, headers: req.headers });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: msg?.id ?? null, error: { code: -32603, message: 'refused by the upstream' } }));
      return;
    }
    if (path === '/garbage') {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not an MCP server</html>');
      return;
    }
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    const sessionId = typeof req.headers['mcp-session-id'] === 'string' ? req.headers['mcp-session-id'] : undefined;
    const rpcMethod = body && typeof body === 'object' && 'method' in body ? String((body as { method: unknown }).method) : null;
    requests.push({ httpMethod: req.method ?? '', rpcMethod, authorization: req.headers.authorization, apiKey: req.headers['x-api-key'] as string | undefined, sessionId, headers: req.headers });
    if (opts.mode === 'stateless') {
      const server = tools(new McpServer({ name: 'test-upstream', version: '1.0.0' }), calls, opts.extraTools);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: opts.json });
      res.on('close', () => void server.close());
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    let transport = sessionId ? transports.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
        return;
      }
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: opts.json,
        onsessioninitialized: (id) => void transports.set(id, t),
        onsessionclosed: (id) => void transports.delete(id),
      });
      transport = t;
      await tools(new McpServer({ name: 'test-upstream', version: '1.0.0' }), calls, opts.extraTools).connect(t);
    }
    await transport.handleRequest(req, res, body);
  }

  const http: Server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(e));
    });
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  return {
    url: `${base}/mcp`,
    hangUrl: `${base}/hang`,
    garbageUrl: `${base}/garbage`,
    refuseUrl: `${base}/refuse`,
    requests,
    calls,
    sessions: () => transports.size,
    reset() {
      requests.length = 0;
      calls.length = 0;
    },
    async close() {
      for (const r of hanging) r.destroy();
      for (const t of transports.values()) await t.close().catch(() => undefined);
      http.closeAllConnections();
      await new Promise((r) => http.close(r));
    },
  };
}
