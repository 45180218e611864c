import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { McpConfig } from '../../config/mcp.ts';
import type { DB } from '../../db/schema.ts';
import type { Mode } from '../guardrails/scanner.ts';
import type { InferenceService } from '../inference/service.ts';
import type { Metering } from '../money/metering.ts';
import { publicBase } from '../proofs/deps.ts';
import type { SandboxDeps } from '../sandboxes/deps.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { McpGateway } from './proxy.ts';
import { McpServersService } from './service.ts';
import { McpSessions, type AccountLock } from './sessions.ts';
import { chatTool } from './tools/chat.ts';
import { ToolRegistry } from './tools/registry.ts';
import { sandboxTool } from './tools/sandbox.ts';
import { verifyTool } from './tools/verify.ts';

export interface Mcp {
  servers: McpServersService;
  gateway: McpGateway;
  tools: ToolRegistry;
  sessions: McpSessions;
}

/**
 * Wires the MCP module: registrations, the gateway, the sessions of the remote server and its tools. Other
 * capabilities add their tools to `tools` when they are wired (the registry is open until the app is built).
 */
export function createMcp(d: {
  config: McpConfig;
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  self: SelfAddress;
  publicUrl: URL;
  metering: Metering;
  signerAddress: string;
  inference: InferenceService;
  sandboxes: SandboxDeps;
  identity: AccountLock;
  /** SVC_GUARDRAILS_MODE: a key's policy applies to the chat tool as to /v1/chat/completions. */
  guardrailsMode: Mode;
  log: { error(o: object, msg: string): void };
}): Mcp {
  const servers = new McpServersService({ db: d.db, clock: d.clock, sealKey: d.sealKey, self: d.self, config: d.config, publicUrl: d.publicUrl });
  const gateway = new McpGateway({ registrations: servers, metering: d.metering, sealKey: d.sealKey, clock: d.clock, self: d.self, config: d.config, publicUrl: d.publicUrl, log: d.log });
  const tools = new ToolRegistry()
    .add(chatTool(d.inference, d.guardrailsMode))
    .add(sandboxTool(d.sandboxes))
    .add(verifyTool({ db: d.db, clock: d.clock, metering: d.metering, signer: d.signerAddress, publicBase: publicBase(d.publicUrl) }));
  return { servers, gateway, tools, sessions: new McpSessions(d.db, d.clock, d.identity, d.config) };
}
