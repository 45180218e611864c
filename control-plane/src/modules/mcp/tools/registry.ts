import type { z } from 'zod';
import type { Scope, SignedReceipt } from '@svc/shared';
import type { KeyPrincipal } from '../../../http/auth-types.ts';

/** What a tool call runs with: the caller's key, the ids its receipt and usage event take, and a way to stream. */
export interface ToolContext {
  principal: KeyPrincipal;
  /** The receipt id of this call (the HTTP request's id: one tool call per request). */
  requestId: string;
  /** X-Svc-Run-Id: the call's receipt joins that run's chain. */
  runId: string | null;
  /** The absolute URL of /v1/mcp, for the payment terms of a 402. */
  resource: string;
  /** The route recorded in the usage event and the receipt. */
  route: string;
  /** Aborts when the call is cancelled (its server closes). A caller that goes away does not cancel it: the call runs to its end and is billed. */
  signal: AbortSignal;
  /** Set when the caller asked for progress (a progressToken): each call sends one progress notification. */
  progress: ((message: string) => void) | null;
}

/** A tool's answer: MCP content for the model, structured fields for programs, and the call's signed receipt. */
export interface ToolAnswer {
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  /** The tool ran, and what it ran reports a failure (a program's non-zero exit). Still metered. */
  isError?: boolean;
  receipt: SignedReceipt;
}

/**
 * One tool of the remote MCP server. Each call is metered and receipted under the caller's key; a refusal
 * or failure is thrown (a ServiceError) and answered as an MCP tool error, never a transport error.
 */
export interface McpTool<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  inputSchema: S;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
  /** Streams progress while it runs, when the caller sent a progressToken (the answer is then SSE). */
  streams?: boolean;
  /**
   * The key scope of the capability the tool uses, needed beside `mcp` (a key or token without it gets a tool
   * error `insufficient_scope`): a scope means the same through MCP as on the capability's own routes.
   */
  scope?: Scope;
  /**
   * The capability's own route (`POST /v1/chat/completions`): a key with a route allow list (a mandate's) must
   * be allowed it as well as /v1/mcp, so a tool opens nothing the key's own routes do not.
   */
  route?: { method: string; url: string };
  run(args: z.infer<S>, ctx: ToolContext): Promise<ToolAnswer>;
}

/**
 * The tools /v1/mcp serves. Capabilities register theirs at boot (chat, sandbox runs and receipt checks
 * here; state and memory tools when those capabilities exist); names are unique.
 */
export class ToolRegistry {
  private readonly tools = new Map<string, McpTool>();

  add<S extends z.ZodObject>(tool: McpTool<S>): this {
    if (!/^[A-Za-z0-9_.-]{1,128}$/.test(tool.name)) throw new Error(`MCP tool name ${JSON.stringify(tool.name)} is not 1-128 of A-Z a-z 0-9 _ . -`);
    if (this.tools.has(tool.name)) throw new Error(`MCP tool ${tool.name} is registered twice`);
    this.tools.set(tool.name, tool as unknown as McpTool);
    return this;
  }

  get(name: string): McpTool | undefined {
    return this.tools.get(name);
  }

  list(): McpTool[] {
    return [...this.tools.values()];
  }

  /** The scopes the tools use, `mcp` first: what a client asks consent for to use them all. */
  scopes(): Scope[] {
    return [...new Set<Scope>(['mcp', ...this.list().flatMap((t) => (t.scope ? [t.scope] : []))])];
  }
}
