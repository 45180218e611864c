import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** A stock SDK client on a gateway MCP endpoint with an API key (or another bearer credential). */
export async function connect(url: string, credential: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${credential}` } } });
  const client = new Client({ name: 'mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** A raw JSON-RPC POST, for what the SDK client would never send: status, headers, text, and the JSON if it is. */
export async function post(url: string, credential: string | null, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(credential ? { authorization: `Bearer ${credential}` } : {}), ...headers },
    body,
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* SSE or empty */
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** A JSON-RPC request (`id` 1 unless given). */
export const rpc = (method: string, params: Record<string, unknown> = {}, id: number | string = 1) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
