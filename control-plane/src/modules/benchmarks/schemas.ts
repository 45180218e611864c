import { z } from 'zod';
import { UNSIGNED_PATTERN } from '../nav/decimal.ts';
import { dateTime } from '../../http/fields.ts';

export const SubmitBody = z
  .strictObject({
    cohort: z.string().min(1).max(64).describe('A cohort of GET /v1/benchmarks/cohorts.'),
    holdings: z
      .array(
        z.strictObject({
          asset_class: z.string().min(1).max(64).describe("One of the cohort's asset classes."),
          value: z.string().regex(UNSIGNED_PATTERN, 'must be a non-negative decimal string such as "250000.00"').describe("Market value in the cohort's currency."),
        }),
      )
      .min(1)
      .max(1000)
      .describe('Positions by asset class (a class may repeat: values add up). Sealed at rest and destroyed at retain_until.'),
    currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as USD').optional().describe("Must be the cohort's currency."),
    retain_until: dateTime({ offset: 'required' }).optional().describe('When the sealed holdings are destroyed (default 30 days from now, at most 2 years); after it, refresh answers 409.'),
    privacy_tier: z.enum(['standard', 'confidential']).default('standard').describe('confidential (computation in an attested enclave) is not implemented: 501.'),
  })
  .describe('A portfolio to benchmark against its peers.');
export type SubmitBody = z.infer<typeof SubmitBody>;

export const BenchmarkParams = z.object({ benchmarkId: z.string().min(1).max(64) });

const Figure = z.object({
  asset_class: z.string(),
  status: z.enum(['released', 'suppressed']),
  mean_weight_bucket: z.string().nullable().describe('The mean allocation weight of the release\'s participants, as a bucket ("20-25%").'),
  holders_band: z.string().nullable().describe('How many participants hold the class, banded ("none" when nobody does).'),
});

export const ResultView = z.object({
  version: z.number(),
  methodology_version: z.string(),
  computed_at: z.string(),
  own: z.array(z.object({ asset_class: z.string(), weight_pct: z.string(), peer_position: z.enum(['below', 'within', 'above']).nullable() })),
  peers: z.object({
    status: z.enum(['released', 'suppressed']),
    reason: z.string().nullable(),
    release_id: z.string().nullable().describe('The release the figures come from; releases are reused until enough participants changed.'),
    participants_band: z.string(),
    figures: z.array(Figure),
  }),
  record: z.object({ canonical: z.string(), sha256: z.string(), signature: z.string(), signer: z.string(), scheme: z.string() }),
  receipt_id: z.string(),
});

export const BenchmarkView = z.object({
  id: z.string(),
  object: z.literal('benchmark'),
  cohort: z.string(),
  created_at: z.string(),
  holdings_sha256: z.string(),
  retention: z.object({
    retain_until: z.string(),
    holdings: z.enum(['sealed', 'destroyed']),
    destroyed_at: z.string().nullable(),
    seconds_remaining: z.number(),
  }),
  versions: z.number(),
  latest: ResultView,
});

export const HistoryView = z.object({ benchmark_id: z.string(), results: z.array(ResultView), note: z.string() });

export const CohortsView = z.object({
  cohorts: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      description: z.string(),
      currency: z.string(),
      asset_classes: z.array(z.string()),
      participants_band: z.string(),
      methodology_version: z.string(),
    }),
  ),
  anti_leakage: z.record(z.string(), z.union([z.string(), z.number()])),
  guarantees_not_implemented: z.array(z.string()),
});
