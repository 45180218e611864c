import { z } from 'zod';

/** Request and response shapes of the MCP routes (they generate the OpenAPI document). */

const ToolName = z.string().min(1).max(128).regex(/^[A-Za-z0-9_./-]+$/, 'tool names are 1-128 of A-Z a-z 0-9 _ . / -');
const Price = z.number().int().min(0).max(1_000_000_000);

const Fields = {
  name: z.string().trim().min(1).max(100),
  url: z.string().min(1).max(2048).describe('The server\'s Streamable HTTP endpoint: http(s), no credentials in it, a public address (private ones only where the deployment allows them), never this gateway. Sealed at rest; never returned.'),
  credential: z.string().min(1).max(4096).nullable().describe('What the gateway authenticates to the server with: sent as `Authorization: Bearer <credential>`, or verbatim in `credential_header`. Sealed at rest; never returned. null: none.'),
  credential_header: z.string().regex(/^[A-Za-z0-9-]{1,64}$/, 'a header name').nullable().describe('The header the credential goes in verbatim (e.g. x-api-key); null: Authorization as a Bearer token.'),
  allowed_tools: z.array(ToolName).max(1000).nullable().describe('Tools a call may name; tools/list shows only these. null: every tool the server lists.'),
  price_micro_usd_per_call: Price.nullable().describe('Charged per tools/call through the gateway; null: the deployment default.'),
  enabled: z.boolean().describe('false: the gateway route answers 404 for this server.'),
};

export const ServerInput = z
  .object({
    name: Fields.name,
    url: Fields.url,
    credential: Fields.credential.optional(),
    credential_header: Fields.credential_header.optional(),
    allowed_tools: Fields.allowed_tools.optional(),
    price_micro_usd_per_call: Fields.price_micro_usd_per_call.optional(),
    enabled: Fields.enabled.optional(),
  })
  .strict();

export const ServerPatch = z
  .object({
    name: Fields.name.optional(),
    url: Fields.url.optional(),
    credential: Fields.credential.optional(),
    credential_header: Fields.credential_header.optional(),
    allowed_tools: Fields.allowed_tools.optional(),
    price_micro_usd_per_call: Fields.price_micro_usd_per_call.optional(),
    enabled: Fields.enabled.optional(),
  })
  .strict();

export const ServerView = z.object({
  id: z.string(),
  object: z.literal('mcp_server'),
  name: z.string(),
  proxy_url: z.string().describe('POST /v1/mcp/servers/{id} with an API key: the passthrough session to this server.'),
  allowed_tools: z.array(z.string()).nullable().describe('null: every tool.'),
  price_micro_usd_per_call: z.number(),
  price_is_default: z.boolean().describe('The price is the deployment default (none set).'),
  enabled: z.boolean(),
  has_credential: z.boolean(),
  credential_header: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const ServerList = z.object({
  servers: z.array(ServerView),
  default_price_micro_usd_per_call: z.number().describe('The price of a server that sets none (SVC_MCP_DEFAULT_PRICE_MICRO_USD).'),
});

export const Deleted = z.object({ id: z.string(), object: z.literal('mcp_server'), deleted: z.literal(true) });

export const Probe = z.object({ id: z.string(), object: z.literal('mcp_server.test'), tools: z.array(z.string()).describe('Tool names the server lists (before the allow list).') });

export const IdParams = z.object({ id: z.string().max(64) });

/** A JSON-RPC 2.0 message, as the OpenAPI document shows the MCP routes' bodies and answers. */
export const JSONRPC_MESSAGE = {
  type: 'object',
  required: ['jsonrpc'],
  properties: {
    jsonrpc: { type: 'string', enum: ['2.0'] },
    id: { type: ['string', 'number'], description: 'Absent on notifications.' },
    method: { type: 'string', description: 'initialize, tools/list, tools/call, ping, notifications/..., and (gateway) whatever the upstream serves.' },
    params: { type: 'object', additionalProperties: true },
    result: { type: 'object', additionalProperties: true, description: 'A response to a request of the server (sampling, elicitation).' },
    error: { type: 'object', additionalProperties: true },
  },
  description: 'One JSON-RPC message per request; batches are refused (400, -32600).',
} as const;

export const RpcAnswer = z
  .object({
    jsonrpc: z.literal('2.0'),
    id: z.union([z.string(), z.number()]).nullable(),
    result: z.record(z.string(), z.unknown()).optional(),
    error: z.object({ code: z.number(), message: z.string(), data: z.record(z.string(), z.unknown()).optional() }).optional(),
  })
  .describe('A JSON-RPC response (application/json), or a text/event-stream whose events are JSON-RPC messages ending with the response. A tools/call result carries its receipt in _meta: "svc/receipt_id" and "svc/receipt" (canonical, hash, signature, signer).');
