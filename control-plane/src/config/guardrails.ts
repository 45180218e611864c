import { z } from 'zod';

/**
 * SVC_GUARDRAILS_MODE: what the rule sets of key policies do on the inference routes. `enforce` (the default):
 * redact and block as configured; `monitor`: let everything through unchanged and record what would have been
 * done (decisions `would_redact`, `would_block`); `off`: scan nothing. Policies' models and
 * max_output_tokens and the receipt stamp apply in every mode.
 */
export const guardrailsEnv = {
  SVC_GUARDRAILS_MODE: z.enum(['enforce', 'monitor', 'off']).default('enforce'),
};

export interface GuardrailsConfig {
  mode: 'enforce' | 'monitor' | 'off';
}

export function guardrailsConfig(e: { SVC_GUARDRAILS_MODE: GuardrailsConfig['mode'] }): GuardrailsConfig {
  return { mode: e.SVC_GUARDRAILS_MODE };
}
