import type { ReceiptEngine } from '@svc/shared';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { RequestGuard } from '../guardrails/enforce.ts';

/** The model names engine builds are called by: `engine/<slug>`, or `engine/<slug>@<version>` for a pin. */
export const ENGINE_PREFIX = 'engine/';

export const isEngineModel = (model: unknown): model is string => typeof model === 'string' && model.startsWith(ENGINE_PREFIX);

/** A chat body of `engine/<slug>` expanded to its build: the request sent, the receipt's stamp, the build policy's guard. */
export interface EngineExpansion {
  body: Record<string, unknown>;
  stamp: ReceiptEngine;
  /** The guard of the guardrail policy the build names (absent: none, or the policy was revoked). */
  guard?: RequestGuard;
}

/** What the inference service asks of the engine module for a call naming `engine/...` (a refusal is a ServiceError). */
export interface EngineExpander {
  expand(p: KeyPrincipal, body: Record<string, unknown>): Promise<EngineExpansion>;
}
