import { z } from 'zod';
import { intWithDefault } from './parse.ts';

/**
 * The remote MCP server (/v1/mcp) and the MCP gateway (/v1/mcp/servers/:id). Upstream MCP servers follow the
 * webhook rules for outbound URLs (SVC_WEBHOOK_ALLOW_PRIVATE decides whether private addresses are allowed).
 */
export const mcpEnv = {
  /** `stateful`: /v1/mcp answers initialize with an Mcp-Session-Id; `stateless`: it never issues one. */
  SVC_MCP_SESSIONS: z.enum(['stateful', 'stateless']).default('stateful'),
  /** Live /v1/mcp sessions per API key; opening one more ends the key's least recently used session. */
  SVC_MCP_SESSIONS_PER_KEY: intWithDefault(16, 1, 10_000),
  /** A /v1/mcp session unused this long is gone (404; the client initializes again). */
  SVC_MCP_SESSION_IDLE_SECONDS: intWithDefault(1800, 10, 7 * 86400),
  /** How long one exchange with an upstream MCP server may take, from connecting to its last byte. */
  SVC_MCP_UPSTREAM_TIMEOUT_SECONDS: intWithDefault(60, 1, 3600),
  /** The per-call price of a registered server that sets none (micro-USD). */
  SVC_MCP_DEFAULT_PRICE_MICRO_USD: intWithDefault(100, 0, 1_000_000_000),
};

export interface McpConfig {
  sessions: 'stateful' | 'stateless';
  sessionsPerKey: number;
  sessionIdleMs: number;
  upstreamTimeoutMs: number;
  defaultPriceMicroUsd: number;
}

type McpEnv = { [K in keyof typeof mcpEnv]: z.infer<(typeof mcpEnv)[K]> };

export function mcpConfig(e: McpEnv): McpConfig {
  return {
    sessions: e.SVC_MCP_SESSIONS,
    sessionsPerKey: e.SVC_MCP_SESSIONS_PER_KEY,
    sessionIdleMs: e.SVC_MCP_SESSION_IDLE_SECONDS * 1000,
    upstreamTimeoutMs: e.SVC_MCP_UPSTREAM_TIMEOUT_SECONDS * 1000,
    defaultPriceMicroUsd: e.SVC_MCP_DEFAULT_PRICE_MICRO_USD,
  };
}
