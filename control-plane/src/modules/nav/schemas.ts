import { z } from 'zod';
import { AnchorFieldSchema } from '../anchors/schemas.ts';
import { Address } from '../attestations/schemas.ts';
import { DECIMAL_PATTERN, UNSIGNED_PATTERN } from './decimal.ts';
import { dateTime } from '../../http/fields.ts';

const NonNegative = z.string().regex(UNSIGNED_PATTERN, 'must be a non-negative decimal string such as "1250.50"');
const Signed = z.string().regex(DECIMAL_PATTERN, 'must be a decimal string such as "1250.50" or "-3"');
const Currency = z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as USD');
const Label = z.string().min(1).max(128);
export const AssetId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/, 'must be 1-128 letters, digits, dots, dashes, underscores or colons');

const Supply = z
  .strictObject({
    chain: z.string().min(1).max(64).describe('A chain of SVC_CHAINS, by name or eip155:<chain id>.'),
    address: Address.describe('The token whose supply is the share count (totalSupply / 10^decimals).'),
    block_number: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().describe("Default: the head minus the chain's confirmations plus one."),
  })
  .describe('Take the share count from a token on chain, read at a pinned block.');

const Holding = z
  .strictObject({
    label: Label.describe('Yours; sealed with the book, never published (the evidence says holdings[i]).'),
    quantity: NonNegative,
    currency: Currency.optional().describe("The price's currency; must be the book's."),
    price: NonNegative.optional().describe('A declared unit price.'),
    price_as_of: dateTime({ offset: 'required' }).optional().describe('When the declared price was observed (default: now); past the freshness window the record is STALE.'),
    price_source: z
      .strictObject({
        url: z.string().min(1).max(2048).describe('An https URL answering JSON.'),
        json_pointer: z.string().max(512).regex(/^(\/.*)?$/, 'must be an RFC 6901 JSON pointer').default(''),
        label: Label.default('price source').describe('Shown in the public evidence.'),
      })
      .optional()
      .describe('Read the unit price from an HTTPS JSON document at each calculation and refresh.'),
  })
  .superRefine((h, ctx) => {
    if (h.price !== undefined && h.price_source !== undefined) ctx.addIssue({ code: 'custom', path: ['price_source'], message: 'give price or price_source, not both' });
    if (h.price_as_of !== undefined && h.price === undefined) ctx.addIssue({ code: 'custom', path: ['price_as_of'], message: 'dates a declared price: give price too' });
  });

const Amount = (what: string) => z.strictObject({ label: Label, amount: NonNegative.describe(what), currency: Currency.optional().describe("Must be the book's.") });

export const CalculateBody = z
  .strictObject({
    asset_id: AssetId.describe('Your name for the asset; the first account to calculate it holds it.'),
    currency: Currency,
    holdings: z.array(Holding).min(1).max(500),
    cash: z.array(Amount('Cash held.')).max(100).default([]),
    liabilities: z.array(Amount('Owed.')).max(100).default([]),
    shares_outstanding: Signed.optional().describe('The share count; or supply for a token on chain.'),
    supply: Supply.optional(),
    freshness_seconds: z.number().int().min(60).max(366 * 86_400).optional().describe('Default SVC_NAV_FRESHNESS_SECONDS.'),
  })
  .superRefine((b, ctx) => {
    if (b.shares_outstanding !== undefined && /^-|^[0.]+$/.test(b.shares_outstanding)) ctx.addIssue({ code: 'custom', path: ['shares_outstanding'], message: 'must be positive: a share count cannot be negative or zero' });
    if (b.shares_outstanding !== undefined && b.supply !== undefined) ctx.addIssue({ code: 'custom', path: ['supply'], message: 'give shares_outstanding or supply, not both' });
    const check = (list: Array<{ currency?: string | undefined }>, key: string) =>
      list.forEach((x, i) => {
        if (x.currency !== undefined && x.currency !== b.currency) ctx.addIssue({ code: 'custom', path: [key, i, 'currency'], message: `is ${x.currency}; the book is in ${b.currency} (one currency per book)` });
      });
    check(b.holdings, 'holdings');
    check(b.cash, 'cash');
    check(b.liabilities, 'liabilities');
  })
  .describe('A private book; sealed with its record and never published.');
export type CalculateBody = z.infer<typeof CalculateBody>;

export const RefreshBody = z.strictObject({ supply: Supply.optional().describe('A newly observed on-chain supply as the share count from now on.') }).default({});
export const PublishBody = z.strictObject({ nav_id: z.string().min(1).max(64).optional().describe('Default: the latest version.') }).default({});

export const AssetParams = z.object({ asset_id: z.string().min(1).max(200) });
export const PublicQuery = z.object({ nav_id: z.string().min(1).max(64).optional() });
export const HistoryQuery = z.object({ limit: z.coerce.number().int().min(1).max(200).default(50) });

const Evidence = z.object({
  input: z.string(),
  source_kind: z.enum(['book', 'declared', 'https', 'evm_rpc']),
  label: z.string(),
  retrieved_at: z.string(),
  sha256: z.string().nullable(),
  salted: z.boolean(),
});
const FiguresSchema = z.object({ gross_assets: z.string(), cash: z.string(), liabilities: z.string(), net_asset_value: z.string(), shares_outstanding: z.string(), nav_per_share: z.string() }).nullable();
const Status = z.enum(['VERIFIED', 'STALE', 'UNAVAILABLE']);

export const NavRecordView = z.object({
  nav_id: z.string(),
  object: z.literal('nav_record'),
  asset_id: z.string(),
  version: z.number(),
  status: Status.describe('Recomputed at read: STALE once fresh_until has passed.'),
  status_at_calculation: Status,
  currency: z.string(),
  figures: FiguresSchema.describe('null when UNAVAILABLE.'),
  missing: z.array(z.string()),
  evidence: z.array(Evidence),
  computed_at: z.string(),
  fresh_until: z.string(),
  supersedes: z.string().nullable(),
  published: z.boolean(),
  published_at: z.string().nullable(),
  record: z.object({ canonical: z.string(), sha256: z.string(), signature: z.string(), signer: z.string(), scheme: z.string() }),
  anchor: AnchorFieldSchema,
});
export const OwnerNavView = NavRecordView.extend({ receipt_id: z.string() });
export const NavHistory = z.object({ records: z.array(NavRecordView), asset_id: z.string(), note: z.string() });
export const NavEvidence = z.object({ object: z.literal('nav_record.evidence'), asset_id: z.string(), nav_id: z.string(), version: z.number(), evidence: z.array(Evidence), note: z.string() });
