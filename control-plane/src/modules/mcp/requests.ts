import type { ZodType } from 'zod';
import { CallToolRequestSchema, InitializeRequestSchema, ListToolsRequestSchema, PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { RPC, RpcFailure, type RpcMessage } from './jsonrpc.ts';

/**
 * The requests the remote server answers, checked against the SDK's own schemas of them before the SDK's
 * server sees them: a request whose params do not match is -32602 (invalid params) naming the first field
 * that is wrong, where the SDK's server would answer -32603 with its whole validation report.
 */
const SCHEMAS: Record<string, ZodType> = {
  initialize: InitializeRequestSchema,
  ping: PingRequestSchema,
  'tools/list': ListToolsRequestSchema,
  'tools/call': CallToolRequestSchema,
};

export function assertParams(m: RpcMessage): void {
  const schema = m.method !== undefined && m.id !== undefined ? SCHEMAS[m.method] : undefined;
  if (!schema) return;
  const r = schema.safeParse(m);
  if (r.success) return;
  const issue = r.error.issues[0]!;
  const at = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
  throw new RpcFailure(200, RPC.invalidParams, `Invalid params: ${at ? `${at}: ` : ''}${issue.message}`, 'invalid_request', m.id ?? null, at.startsWith('params.') ? { param: at.slice('params.'.length) } : {});
}

/** Whether a JSON-RPC answer is a result (not an error). */
export function succeeded(text: string): boolean {
  try {
    const v = JSON.parse(text) as { result?: unknown; error?: unknown };
    return v !== null && typeof v === 'object' && v.result !== undefined && v.error === undefined;
  } catch {
    return false;
  }
}
