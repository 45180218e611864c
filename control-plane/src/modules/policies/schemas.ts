import { z } from 'zod';

const ModelPattern = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[^*]+\*?$/, 'a model id, or a prefix ending in a single * (gpt-4o*)');

/** The optional `policy` of POST /v1/keys and POST /v1/keys/delegate. Unknown fields are refused, naming them. */
export const PolicyIn = z
  .object({
    guardrails: z.array(z.string().min(1).max(64)).max(20).describe('Ids of your guardrail rule sets (POST /v1/guardrails) enforced on the key\'s inference calls.'),
    models: z.array(ModelPattern).min(1).max(100).optional().describe('The only models the key may call: ids, or prefixes ending in *. Omitted: any.'),
    max_output_tokens: z.number().int().min(1).max(10_000_000).optional().describe('The most output tokens a call may ask for; a call that asks for none is bounded by it.'),
  })
  .strict()
  .describe("A policy the key carries, stored once per distinct content and stamped (id and sha256) on every receipt of the key. A delegated key inherits its parent's and may only add to it.");

export const PolicyRef = z.object({ id: z.string(), sha256: z.string() });

export const PolicyView = z.object({
  id: z.string(),
  object: z.literal('policy'),
  sha256: z.string().describe('sha256 of `canonical`.'),
  canonical: z.string().describe('The policy as RFC 8785 canonical JSON.'),
  guardrails: z.array(z.string()),
  models: z.array(z.string()).nullable(),
  max_output_tokens: z.number().int().nullable(),
  created_at: z.string(),
});
