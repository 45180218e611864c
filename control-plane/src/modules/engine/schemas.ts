import { z } from 'zod';
import { SLUG_PATTERN, SLUG_RULE } from './spec.ts';

/** The most build versions an account holds (all slugs); the list is complete up to it. */
export const BUILDS_CAP = 500;
export const MAX_PROMPT_CHARS = 100_000;

export const Slug = z.string().max(64).regex(SLUG_PATTERN, `a slug is ${SLUG_RULE}`).describe(`The name called as engine/<slug>: ${SLUG_RULE}.`);

const Tool = z.object({ type: z.string().min(1).max(64) }).loose();

export const DraftBody = z.strictObject({
  slug: Slug,
  model: z.string().min(1).max(200).describe('A chat model of the catalog (GET /v1/models); not another engine build.'),
  system_prompt: z
    .string()
    .min(1)
    .max(MAX_PROMPT_CHARS)
    .optional()
    .describe('Sent first with every call. Sealed at rest and never returned; only its sha256 enters the canonical spec.'),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  max_tokens: z.number().int().min(1).max(10_000_000).optional().describe("At most the model's output bound."),
  tools: z.array(Tool).min(1).max(128).optional().describe('OpenAI-shape tool definitions sent with every call (they replace the caller\'s).'),
  tool_choice: z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.string() }).loose()]).optional(),
  guardrail_policy_id: z.string().min(1).max(128).optional().describe('A live policy of the account (GET /v1/policies): its rule sets scan the calls of this build; its id and sha256 enter the spec.'),
});
export type DraftInput = z.infer<typeof DraftBody>;

export const BuildParams = z.object({ id: z.string().min(1).max(64) });
export const SlugParams = z.object({ slug: z.string().min(1).max(200) });
export const ListQuery = z.strictObject({ slug: Slug.optional().describe('Only the versions of this slug.') });

const Parameters = z
  .object({
    temperature: z.number().optional(),
    top_p: z.number().optional(),
    max_tokens: z.number().int().optional(),
    tools: z.array(z.unknown()).optional(),
    tool_choice: z.unknown().optional(),
  })
  .describe('The parameters sent with every call; they replace what the caller sends for the same fields.');

const PolicyRef = z.object({ id: z.string(), sha256: z.string() }).nullable();

export const Spec = z.object({
  guardrail_policy: PolicyRef,
  kind: z.literal('engine_build_spec'),
  model: z.string(),
  parameters: Parameters,
  slug: z.string(),
  system_prompt_sha256: z.string().nullable(),
  v: z.literal(1),
});

export const BuildView = z.object({
  id: z.string(),
  object: z.literal('engine.build'),
  slug: z.string(),
  version: z.number().int(),
  state: z.enum(['draft', 'published', 'retired']).describe('draft until published; published: engine/<slug> serves it; retired: unpublished or replaced, its pins stop resolving.'),
  model_name: z.string().describe('engine/<slug>@<version>: the pin of this version (resolves while it is published).'),
  model: z.string(),
  parameters: Parameters,
  system_prompt_sha256: z.string().nullable(),
  system_prompt_destroyed: z.boolean().describe('DELETE destroyed the sealed prompt; the row, its hash and spec stay.'),
  guardrail_policy: PolicyRef,
  spec: Spec,
  spec_canonical: z.string().describe('RFC 8785 canonical JSON of the spec: the bytes spec_sha256 covers.'),
  spec_sha256: z.string().describe('Hex sha256 of spec_canonical.'),
  origin: z.enum(['api', 'autopilot']),
  proposal_id: z.string().nullable(),
  created_at: z.string(),
  published_at: z.string().nullable(),
  retired_at: z.string().nullable(),
  deleted_at: z.string().nullable(),
});

export const BuildList = z.object({
  builds: z.array(BuildView).describe('Newest first; complete (an account holds at most 500 versions).'),
});

export const Resolved = z.object({
  object: z.literal('engine.resolution'),
  model_name: z.string().describe('engine/<slug>'),
  slug: z.string(),
  build_id: z.string(),
  version: z.number().int(),
  spec_sha256: z.string(),
  spec_canonical: z.string(),
  published_at: z.string(),
  configuration: z.object({
    model: z.string(),
    parameters: Parameters,
    system_prompt_sha256: z.string().nullable(),
    guardrail_policy: PolicyRef.describe('As drafted; live: whether it still constrains the calls (a revoked policy does not).'),
    guardrail_policy_live: z.boolean(),
  }),
});
