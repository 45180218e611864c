import { z } from 'zod';
import { AnchorFieldSchema } from '../anchors/schemas.ts';

/** Jurors per verdict (spec document 3). */
export const MIN_JURORS = 1;
export const MAX_JURORS = 5;
export const MAX_EVIDENCE_ITEMS = 50;
export const MAX_EVIDENCE_CHARS = 262_144;

const wellFormed = (s: string) => !/\p{Surrogate}/u.test(s);
const Text = (min: number, max: number) => z.string().min(min).max(max).refine(wellFormed, 'must be well-formed Unicode (no lone surrogate): its sha256 covers its UTF-8 bytes');

const distinct = (what: string) => (list: readonly string[], ctx: z.RefinementCtx) => {
  const seen = new Map<string, number>();
  list.forEach((v, i) => {
    const first = seen.get(v);
    if (first !== undefined) ctx.addIssue({ code: 'custom', path: [i], message: `repeats ${what} [${first}]: ${what}s are distinct` });
    else seen.set(v, i);
  });
};

export const VerdictInput = z
  .strictObject({
    models: z
      .array(z.string().min(1).max(256))
      .min(MIN_JURORS, `a verdict asks ${MIN_JURORS} to ${MAX_JURORS} juror models`)
      .max(MAX_JURORS, `a verdict asks ${MIN_JURORS} to ${MAX_JURORS} juror models`)
      .superRefine(distinct('juror model'))
      .describe(`The juror models (chat models of the catalog), ${MIN_JURORS} to ${MAX_JURORS}, each once: ask again for another sample of the same model.`),
    question: Text(1, 8000).describe('Returned once and never stored (only its sha256 is signed) until you publish the verdict.'),
    options: z.array(Text(1, 200).refine((o) => o.trim() === o, 'has surrounding spaces')).min(2).max(10).superRefine(distinct('option')).describe('What a juror may vote for, 2 to 10 distinct options.'),
    evidence: z
      .array(z.strictObject({ label: Text(1, 128), content: Text(0, 65_536) }))
      .min(1)
      .max(MAX_EVIDENCE_ITEMS)
      .superRefine((items, ctx) => {
        const seen = new Map<string, number>();
        items.forEach((it, i) => {
          const first = seen.get(it.label);
          if (first !== undefined) ctx.addIssue({ code: 'custom', path: [i, 'label'], message: `repeats the label of evidence[${first}]: labels are distinct` });
          else seen.set(it.label, i);
        });
        const total = items.reduce((n, i) => n + i.content.length, 0);
        if (total > MAX_EVIDENCE_CHARS) ctx.addIssue({ code: 'custom', path: [], message: `holds ${total} characters of content; at most ${MAX_EVIDENCE_CHARS} in all` });
      })
      .describe('Labeled evidence shown to every juror. Its content is never stored: the signed outcome holds each label with the sha256 of its content, and their Merkle root.'),
    max_tokens: z.number().int().min(16).max(8000).default(800).describe('The most tokens each juror answers with (default 800).'),
    temperature: z.number().min(0).max(2).default(0),
  })
  .describe('Ask the juror models one question over labeled evidence.');
export type VerdictInput = z.infer<typeof VerdictInput>;

export const PublishInput = z.strictObject({
  question: Text(0, 8000).describe('The question as asked: its sha256 must equal the signed question_sha256.'),
  rationales: z
    .array(Text(0, 8000).nullable())
    .min(MIN_JURORS)
    .max(MAX_JURORS)
    .describe("Each juror's rationale as returned, in the jurors' order; null for a juror that abstained. Each sha256 must equal the signed rationale_sha256."),
});
export type PublishInput = z.infer<typeof PublishInput>;

export const VerdictParams = z.object({ id: z.string().min(1).max(64) });
export const ListQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(200).default(50).describe('1 to 200, default 50.') });

const SignedDocument = z.object({
  id: z.string().describe('The request id that made it.'),
  payload: z.record(z.string(), z.unknown()),
  canonical: z.string().describe('RFC 8785 canonical JSON of the payload: the exact text signed.'),
  hash: z.string().describe('0x sha256 of the canonical text: the anchored leaf.'),
  signature: z.string().describe('EIP-191 personal_sign of the canonical text by the receipt signer (GET /v1/receipts/pubkey).'),
  signer: z.string(),
});

const Juror = z.object({
  model: z.string(),
  vote: z.string().nullable(),
  abstained: z.boolean(),
  abstain_reason: z.string().nullable().describe("Why the juror abstained, in the gateway's words: its call failed (the error), or its answer was out of format (how)."),
  rationale_sha256: z.string().nullable(),
  receipt_id: z.string().nullable().describe("The juror call's receipt (a metered chat completion of the calling key); null when the call failed before one was signed."),
  receipt_hash: z.string().nullable(),
  cost_micro_usd: z.number().int(),
});

const Evidence = z.object({ root: z.string(), leaf: z.string(), tree: z.string(), items: z.array(z.object({ label: z.string(), sha256: z.string() })) });

export const VerdictView = z.object({
  id: z.string(),
  object: z.literal('judge_verdict'),
  state: z.enum(['unpublished', 'published']),
  models: z.array(z.string()),
  options: z.array(z.string()),
  question_sha256: z.string(),
  evidence: Evidence,
  jurors: z.array(Juror),
  tally: z.array(z.object({ option: z.string(), votes: z.number().int() })),
  abstentions: z.number().int(),
  outcome: z.string().nullable().describe('The plurality winner; null on a tie or when every juror abstained.'),
  decision_rule: z.string(),
  receipt: SignedDocument.describe('The signed outcome.'),
  anchor: AnchorFieldSchema.describe("The public anchor of the signed outcome (the leaf is its hash)."),
  created_at: z.string(),
  published_at: z.string().nullable(),
  unpublished_at: z.string().nullable(),
  public_url: z.string(),
  page_url: z.string().describe('The public page /j/{id} (404 unless published), which verifies the verdict in the browser.'),
});

const JurorReceipt = SignedDocument.omit({ signer: true });

export const CreatedVerdict = VerdictView.extend({
  question: z.string().describe('Returned once: not stored unless published.'),
  jurors: z.array(Juror.extend({ rationale: z.string().nullable().describe('Returned once: not stored unless published.'), receipt: JurorReceipt.nullable() })),
});

export const PublicVerdict = VerdictView.extend({
  question: z.string(),
  jurors: z.array(Juror.extend({ rationale: z.string().nullable() })),
  trust_model: z.string(),
});

export const VerdictList = z.object({
  verdicts: z.array(VerdictView).describe('Newest first, content-free.'),
  trust_model: z.string().describe('What a verdict proves and what it does not.'),
});
