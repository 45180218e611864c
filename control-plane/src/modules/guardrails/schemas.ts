import { z } from 'zod';
import { MAX_PATTERNS, MAX_TERMS, MAX_TERM_LENGTH } from './blocklist.ts';
import { INJECTION_CATEGORIES } from './injection.ts';
import { MAX_PATTERN_LENGTH, patternProblem } from './patterns.ts';
import { PII_CATEGORIES } from './pii.ts';
import { SECRET_CATEGORIES } from './secrets.ts';
import { ACTIONS, DETECTOR_TYPES } from './types.ts';

const Action = z.enum(ACTIONS).describe('allow: record findings only; redact: replace each match with [REDACTED:<category>]; block: refuse the request (input) or stop the answer (output).');
const directions = {
  input: Action.optional().describe('What to do with matches in the request (prompt, messages, system, embeddings input). Omitted: not scanned.'),
  output: Action.optional().describe('What to do with matches in the answer, streamed or not. Omitted: not scanned.'),
};

const Pii = z.object({ type: z.literal('pii'), ...directions, categories: z.array(z.enum(PII_CATEGORIES)).min(1).max(PII_CATEGORIES.length).optional().describe('Omitted: every category.') }).strict();
const Secrets = z.object({ type: z.literal('secrets'), ...directions, categories: z.array(z.enum(SECRET_CATEGORIES)).min(1).max(SECRET_CATEGORIES.length).optional().describe('Omitted: every category.') }).strict();
const Injection = z.object({ type: z.literal('prompt_injection'), ...directions }).strict().describe(`Categories: ${INJECTION_CATEGORIES.join(', ')}.`);
const Blocklist = z
  .object({
    type: z.literal('blocklist'),
    ...directions,
    terms: z.array(z.string().trim().min(1).max(MAX_TERM_LENGTH)).max(MAX_TERMS).optional().describe('Whole words or phrases, matched after NFKC normalization and case folding.'),
    patterns: z.array(z.string().min(1).max(MAX_PATTERN_LENGTH)).max(MAX_PATTERNS).optional().describe('RE2 patterns with a bounded match (at most 128 characters); catastrophic backtracking shapes, lookaround and backreferences are refused.'),
  })
  .strict();

export const DetectorIn = z.discriminatedUnion('type', [Pii, Secrets, Injection, Blocklist]).describe(`A detector: ${DETECTOR_TYPES.join(', ')}.`);

export const GuardrailInput = z
  .object({
    name: z.string().trim().min(1).max(100).optional(),
    detectors: z
      .array(DetectorIn)
      .min(1)
      .max(DETECTOR_TYPES.length)
      .superRefine((ds, ctx) => {
        const seen = new Map<string, number>();
        ds.forEach((d, i) => {
          const first = seen.get(d.type);
          if (first !== undefined) ctx.addIssue({ code: 'custom', path: [i, 'type'], message: `repeats the detector of detectors[${first}]; a rule set has one of each type` });
          else seen.set(d.type, i);
          if (!d.input && !d.output) ctx.addIssue({ code: 'custom', path: [i], message: 'names neither direction: set input, output or both to allow, redact or block' });
          if (d.type === 'blocklist') {
            if (!d.terms?.length && !d.patterns?.length) ctx.addIssue({ code: 'custom', path: [i, 'terms'], message: 'a blocklist needs terms or patterns' });
            d.patterns?.forEach((p, j) => {
              const problem = patternProblem(p);
              if (problem) ctx.addIssue({ code: 'custom', path: [i, 'patterns', j], message: `refused: ${problem}` });
            });
          }
        });
      }),
  })
  .strict();
export type GuardrailInput = z.infer<typeof GuardrailInput>;

export const GuardrailView = z.object({
  id: z.string(),
  object: z.literal('guardrail'),
  name: z.string().nullable(),
  detectors: z.array(z.record(z.string(), z.unknown())).describe('As created.'),
  created_at: z.string(),
});

export const Mode = z.enum(['enforce', 'monitor', 'off']).describe("The deployment's SVC_GUARDRAILS_MODE.");

export const FindingEvent = z.object({
  receipt_id: z.string(),
  created_at: z.string(),
  route: z.string(),
  model: z.string().nullable(),
  key_id: z.string().nullable(),
  policy_id: z.string().nullable(),
  rule: z.string().describe('<rule set id>/<detector type>'),
  direction: z.enum(['input', 'output']),
  category: z.string(),
  count: z.number().int(),
  severity: z.string(),
  action: z.string(),
  decision: z.string().describe('allowed, redacted, blocked (enforce mode); would_redact, would_block (monitor mode).'),
});

export const FindingsQuery = z.object({ limit: z.coerce.number().int().min(1).max(1000).default(200).describe('How many of your newest receipts to decode, 1-1000 (default 200).') }).strict();

export const FindingsView = z.object({
  events: z.array(FindingEvent).describe('Newest receipt first; never the matched text.'),
  enforced: z.boolean().describe('The deployment enforces rule sets now (SVC_GUARDRAILS_MODE=enforce).'),
  scanned_receipts: z.number().int().describe('The ?limit= asked: how many of the newest receipts were decoded (fewer when the account has fewer).'),
  blocked: z.number().int().describe('Requests among them that a rule set blocked.'),
  totals: z.object({
    events: z.number().int(),
    matches: z.number().int(),
    by_category: z.record(z.string(), z.number().int()),
    by_decision: z.record(z.string(), z.number().int()),
    by_direction: z.record(z.string(), z.number().int()),
  }),
  note: z.string(),
});
