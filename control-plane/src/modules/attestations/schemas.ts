import { z } from 'zod';
import { AnchorFieldSchema } from '../anchors/schemas.ts';
import { INTEGER_PATTERN, UNSIGNED_PATTERN } from '../nav/decimal.ts';

export const Address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte address');
const BaseUnits = z.string().regex(INTEGER_PATTERN, 'must be a decimal integer string in base units (no sign, no decimal point)');
const Figure = z.string().regex(UNSIGNED_PATTERN, 'must be a non-negative decimal string such as "1250000.50"');
const Label = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$/, 'must be 1-64 letters, digits, spaces, dots, dashes or underscores');
const Freshness = z.number().int().min(60).max(366 * 86_400);

const oneOf = (a: string, b: string) => (v: Record<string, unknown>, ctx: z.RefinementCtx) => {
  if (v[a] !== undefined && v[b] !== undefined) ctx.addIssue({ code: 'custom', path: [b], message: `give ${a} or ${b}, not both` });
};

export const CheckBody = z
  .strictObject({
    subject: z
      .strictObject({
        chain: z.string().min(1).max(64).describe('A chain of this gateway (SVC_CHAINS): its name or eip155:<chain id>.'),
        address: Address.describe('The ERC-20 contract.'),
      })
      .describe('The asset: an ERC-20 token on a configured EVM chain. Its asset id is eip155:<chain id>:<address>.'),
    block_number: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().describe("The block every chain fact is read at; default the head minus the chain's confirmations plus one."),
    claims: z
      .strictObject({
        code_hash: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed keccak256').optional().describe('keccak256 of the deployed code.'),
        name: z.string().max(256).optional(),
        symbol: z.string().max(64).optional(),
        decimals: z.number().int().min(0).max(255).optional(),
        total_supply: BaseUnits.optional().describe('In base units.'),
      })
      .default({})
      .describe('Facts claimed about the token; each is compared exactly with what is read. Facts not claimed are read and recorded all the same.'),
    reserves: z
      .array(
        z
          .strictObject({
            label: Label,
            address: Address.describe('The reserve address whose balance is read.'),
            token: Address.optional().describe('The ERC-20 held in reserve; default the asset itself.'),
            claimed_balance: BaseUnits.optional().describe('Claimed exact balance, in base units.'),
            min_balance: BaseUnits.optional().describe('Claimed least balance, in base units.'),
          })
          .superRefine(oneOf('claimed_balance', 'min_balance')),
      )
      .max(20)
      .default([])
      .superRefine((list, ctx) => {
        const seen = new Set<string>();
        list.forEach((r, i) => {
          if (seen.has(r.label)) ctx.addIssue({ code: 'custom', path: [i, 'label'], message: 'repeats a label: reserve labels are distinct' });
          seen.add(r.label);
        });
      })
      .describe('Named reserve addresses whose balances are read at the pinned block.'),
    reserve_source: z
      .strictObject({
        url: z.string().min(1).max(2048).describe('An https URL answering JSON.'),
        json_pointer: z.string().max(512).regex(/^(\/.*)?$/, 'must be an RFC 6901 JSON pointer ("" or starting with /)').default('').describe('Where the figure is in the document (RFC 6901).'),
        label: Label.default('reserve figure'),
        claimed_figure: Figure.optional(),
        min_figure: Figure.optional(),
      })
      .superRefine(oneOf('claimed_figure', 'min_figure'))
      .optional()
      .describe('A reserve figure published over HTTPS (an issuer declaration): a record that reads one is never served by the public verification route.'),
    freshness_seconds: Freshness.optional().describe('How long the record counts as fresh; past it, reads report STALE. Default SVC_ATTESTATION_FRESHNESS_SECONDS.'),
  })
  .describe('What to check about an asset.');
export type CheckBody = z.infer<typeof CheckBody>;

export const RefreshBody = z
  .strictObject({ block_number: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().describe('Default: the head minus the chain\'s confirmations plus one.') })
  .default({});

export const AssetParams = z.object({ asset_id: z.string().min(1).max(200) });
export const HistoryQuery = z.object({ limit: z.coerce.number().int().min(1).default(50).describe('Default 50, not clamped; 200 is the supported ceiling.') });
export const EvidenceQuery = z.object({
  include_body: z.enum(['true', 'false']).default('false').transform((v) => v === 'true').describe('true: each reading carries the bytes read, base64.'),
  version: z.coerce.number().int().min(1).optional().describe('Default: the current version.'),
});

const Status = z.enum(['VERIFIED', 'DISCREPANCY', 'UNAVAILABLE']);
const Reported = z.enum(['VERIFIED', 'DISCREPANCY', 'UNAVAILABLE', 'STALE']);
const Subject = z.object({ kind: z.literal('evm_token'), chain: z.string(), chain_id: z.number(), address: z.string() });
const Block = z.object({ number: z.number(), hash: z.string(), timestamp: z.number() }).nullable();
export const ReadingSchema = z.object({
  name: z.string(),
  kind: z.enum(['evm_rpc', 'https']),
  pinned: z.boolean(),
  request: z.string().describe('The exact JSON-RPC request body sent (or GET <url>).'),
  value: z.union([z.string(), z.number()]).nullable(),
  outcome: z.enum(['read', 'absent', 'unavailable']),
  error: z.string().nullable(),
  claimed: z.union([z.string(), z.number()]).nullable(),
  check: z.enum(['equals', 'at_least']).nullable(),
  matches: z.boolean().nullable(),
  sha256: z.string().nullable().describe('sha256 of the exact bytes answered.'),
  bytes: z.number(),
  read_at: z.string(),
});
export const SignedRecord = z.object({
  document: z.record(z.string(), z.unknown()),
  canonical: z.string().describe('RFC 8785 canonical JSON of the document: the signed bytes.'),
  sha256: z.string(),
  signature: z.string().describe('EIP-191 personal_sign over `canonical`.'),
  signer: z.string(),
  scheme: z.string(),
});

export const AttestationView = z.object({
  id: z.string(),
  object: z.literal('attestation'),
  asset_id: z.string(),
  version: z.number(),
  status: Reported.describe('Recomputed at read: STALE once fresh_until has passed.'),
  status_at_check: Status,
  subject_ref: z.string(),
  subject: Subject,
  block: Block,
  readings: z.array(ReadingSchema),
  discrepancies: z.array(z.string()),
  unavailable: z.array(z.string()),
  public_inputs: z.boolean(),
  supersedes: z.string().nullable(),
  checked_at: z.string(),
  freshness_seconds: z.number(),
  fresh_until: z.string(),
  record: SignedRecord,
  receipt_id: z.string(),
  anchor: AnchorFieldSchema,
});

export const HistoryView = z.object({
  versions: z.array(AttestationView),
  asset_id: z.string(),
  subject_ref: z.string(),
  note: z.string(),
  disclaimer: z.string(),
});

export const EvidenceView = z.object({
  object: z.literal('attestation.evidence'),
  asset_id: z.string(),
  record_id: z.string(),
  version: z.number(),
  block: Block,
  readings: z.array(
    ReadingSchema.pick({ name: true, kind: true, pinned: true, request: true, value: true, outcome: true, sha256: true, bytes: true, read_at: true }).extend({
      source: z.string().describe('Where it was read: the chain (eip155:<id>) or the HTTPS origin.'),
      body_base64: z.string().nullable().optional().describe('The bytes read (with include_body=true).'),
    }),
  ),
});

export const PublicVerification = z.object({
  object: z.literal('asset_verification'),
  asset_id: z.string(),
  status: Reported,
  status_at_check: Status,
  subject: Subject,
  block: Block,
  readings: z.array(ReadingSchema),
  discrepancies: z.array(z.string()),
  checked_at: z.string(),
  fresh_until: z.string(),
  record: SignedRecord.omit({ document: true }),
  anchor: AnchorFieldSchema,
  how_to_verify: z.string(),
  disclaimer: z.string(),
});
