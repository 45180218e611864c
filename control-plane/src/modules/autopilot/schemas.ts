import { z } from 'zod';
import { Slug } from '../engine/schemas.ts';

/** The most proposals the list shows, newest first. */
export const PROPOSALS_LISTED = 200;
export const MAX_TARGETS = 3;

const Ids = (what: string, max: number) => z.array(z.string().min(1).max(64)).min(1).max(max).describe(`${what} of the account (at most ${max}) to evaluate every target on.`);

export const AnalyzeBody = z.strictObject({
  opt_in: z
    .literal(true, { error: 'opt_in: must be true: an analysis runs billed inference (every evaluation call is metered under key_id)' })
    .describe('Must be true: the analysis runs billed inference calls under key_id.'),
  key_id: z.string().min(1).max(64).describe('An API key of the account with the inference scope: every evaluation call is metered and receipted under it.'),
  window_days: z.number().int().min(1).max(90).default(30).describe('How far back usage is read (default 30 days).'),
  suite_ids: Ids('Eval suites', 10).optional().describe('Eval suites of the account to evaluate every target on; by default each target is evaluated on the suites whose model is its current model (at most 5).'),
  capsule_ids: Ids('Replay capsules', 20).optional().describe('Replay capsules of the account to evaluate every target on; by default each target is evaluated on the live capsules that name it (at most 10).'),
  repeat: z.number().int().min(1).max(5).default(1).describe('How many times each suite case runs per configuration.'),
  max_candidates: z.number().int().min(1).max(5).default(2).describe('How many cheaper catalog models are evaluated per target, cheapest first.'),
});
export type AnalyzeInput = z.infer<typeof AnalyzeBody>;

export const AdoptBody = z
  .strictObject({
    slug: Slug.optional().describe('For a proposal about a model called directly: the engine slug to publish the candidate under (required there; an engine target keeps its slug).'),
  })
  .nullish();

export const ProposalParams = z.object({ id: z.string().min(1).max(64) });

const Rates = z.object({ model: z.string(), pass_rate: z.number(), passed_attempts: z.number().int(), attempts: z.number().int(), cost_micro_usd: z.number().int() });

export const Evidence = z
  .object({
    usage: z.object({ window_days: z.number().int(), from: z.string(), to: z.string(), requests: z.number().int(), cost_micro_usd: z.number().int(), input_tokens: z.number().int(), output_tokens: z.number().int() }),
    costs: z.object({
      current: z.object({ model: z.string(), input_micro_usd_per_mtok: z.number(), output_micro_usd_per_mtok: z.number(), projected_micro_usd: z.number().int() }),
      candidate: z.object({ model: z.string(), input_micro_usd_per_mtok: z.number(), output_micro_usd_per_mtok: z.number(), projected_micro_usd: z.number().int() }),
      savings_micro_usd: z.number().int(),
      savings_percent: z.number(),
    }),
    suites: z.array(z.object({ suite_id: z.string(), name: z.string(), cases: z.number().int(), repeat: z.number().int(), baseline: Rates, candidate: Rates, regressed_cases: z.array(z.number().int()), regression: z.boolean() })),
    capsules: z.object({
      samples: z.number().int(),
      baseline_matches: z.number().int(),
      candidate_matches: z.number().int(),
      results: z.array(z.object({ capsule_id: z.string(), baseline_matched: z.boolean(), candidate_matched: z.boolean() })),
      regression: z.boolean(),
    }),
    sample_size: z.object({ suite_attempts: z.number().int(), capsules: z.number().int() }),
    evaluation_cost_micro_usd: z.number().int(),
    regression: z.boolean(),
  })
  .describe('Everything the proposal rests on: usage and projected costs, per-suite pass rates of both configurations, capsule fingerprint matches, sample sizes.');

export const ProposalView = z.object({
  id: z.string(),
  object: z.literal('autopilot.proposal'),
  analysis_id: z.string(),
  state: z.enum(['open', 'adopted', 'rejected']),
  target: z.object({ kind: z.enum(['engine', 'model']), name: z.string().describe('engine/<slug>, or the catalog model called directly.'), build_id: z.string().nullable() }),
  current_model: z.string(),
  candidate_model: z.string(),
  regression: z.boolean().describe('The evidence says regression: adoption is refused for everyone.'),
  savings_micro_usd: z.number().int(),
  evidence: Evidence,
  evidence_sha256: z.string().describe('Hex sha256 of the evidence\'s RFC 8785 canonical JSON.'),
  key_id: z.string(),
  created_at: z.string(),
  decided_at: z.string().nullable(),
  decided_by: z.string().nullable(),
  adopted_build_id: z.string().nullable(),
});

export const ProposalList = z.object({ proposals: z.array(ProposalView).describe(`Open and decided, newest first (the newest ${PROPOSALS_LISTED}).`) });

export const Analysis = z.object({
  object: z.literal('autopilot.analysis'),
  id: z.string(),
  window: z.object({ from: z.string(), to: z.string(), days: z.number().int() }),
  usage: z.array(z.object({ kind: z.enum(['engine', 'model']), target: z.string(), requests: z.number().int(), cost_micro_usd: z.number().int(), input_tokens: z.number().int(), output_tokens: z.number().int() })).describe('Metered chat traffic of the window per target, dearest first.'),
  proposals: z.array(ProposalView),
  skipped: z.array(z.object({ kind: z.enum(['engine', 'model']), target: z.string(), reason: z.string() })).describe('Targets not proposed for, with why (no cheaper model, no evidence, not published).'),
  evaluation_cost_micro_usd: z.number().int(),
});
