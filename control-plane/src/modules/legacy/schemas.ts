import { z } from 'zod';
import { dateTime } from '../../http/fields.ts';
import { AnchorFieldSchema } from '../anchors/schemas.ts';
import {
  ATTESTERS_MAX, BENEFICIARIES_MAX, FILE_MAX_BYTES, FILES_MAX, GRACE_DEFAULT_SECONDS, GRACE_MAX_SECONDS, GRACE_MIN_SECONDS,
  INTERVAL_MAX_SECONDS, INTERVAL_MIN_SECONDS, LIST_CAP, NOTE_MAX_CHARS,
} from './limits.ts';

const noNul = (s: z.ZodString) => s.refine((v) => !v.includes('\0'), 'contains a NUL character (\\u0000), which this field does not accept');
export const Wallet = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte EVM address');
const Label = noNul(z.string().trim().min(1).max(100));
const Party = z.strictObject({ wallet: Wallet, label: Label.optional().describe('A name for your own reference; shown only to you.') });

const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const FileIn = z.strictObject({
  name: noNul(z.string().trim().min(1).max(255)).describe('The file name the beneficiary sees.'),
  content_type: z
    .string()
    .regex(/^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+$/, 'must be a media type such as application/pdf')
    .max(200)
    .optional()
    .describe('Default application/octet-stream.'),
  content_b64: z
    .string()
    .max(Math.ceil((FILE_MAX_BYTES * 4) / 3) + 4)
    .regex(B64, 'must be standard base64 (A-Z a-z 0-9 + /, padded with =)')
    .describe(`The file's bytes, base64; at most ${FILE_MAX_BYTES} bytes decoded.`),
});

const Content = {
  note: noNul(z.string().min(1).max(NOTE_MAX_CHARS)).describe(`The note released to beneficiaries, 1 to ${NOTE_MAX_CHARS} characters; sealed at rest.`),
  files: z.array(FileIn).max(FILES_MAX).optional().describe(`Up to ${FILES_MAX} files, 2 MiB in all; sealed at rest.`),
};

export const CreateBody = z.strictObject({
  name: noNul(z.string().trim().min(1).max(200)).describe('The plan name: shown to attesters and, on the claim link, to anyone holding it.'),
  ...Content,
  checkin_interval_seconds: z.number().int().min(INTERVAL_MIN_SECONDS).max(INTERVAL_MAX_SECONDS).describe('Check-in cadence: every check-in moves the deadline this far from its time.'),
  grace_seconds: z
    .number()
    .int()
    .min(GRACE_MIN_SECONDS)
    .max(GRACE_MAX_SECONDS)
    .optional()
    .describe(`How long a plan stays in warning before it can be released, counted from the warning; default ${GRACE_DEFAULT_SECONDS}.`),
  deadline: dateTime().optional().describe('The first deadline (a future date-time); default now plus the cadence.'),
  beneficiaries: z.array(Party).min(1).max(BENEFICIARIES_MAX).describe('Who receives the release, by EVM wallet; each gets a claim link, shown once.'),
  attesters: z.array(Party).max(ATTESTERS_MAX).optional().describe('Wallets whose confirmations, given while the plan is in warning, are needed for release.'),
  quorum: z.number().int().min(1).max(ATTESTERS_MAX).optional().describe('How many attesters must confirm; default a majority. Only with attesters.'),
});

export const ContentBody = z.strictObject(Content);
export const AttestBody = z
  .strictObject({ wallet: Wallet.optional().describe('Which of your wallets confirms, when you hold several named attesters.') })
  .nullish()
  .describe('Optional.');
export const PlanParams = z.object({ id: z.string().min(1).max(64) });
export const ClaimParams = z.object({ plan_id: z.string().min(1).max(64) });
export const ObjectParams = z.object({ plan_id: z.string().min(1).max(64), object_id: z.string().min(1).max(64) });
export const TokenParams = z.object({ token: z.string().min(1).max(200) });

const Status = z.enum(['active', 'warning', 'released', 'cancelled']);
const ObjectMeta = z.object({ id: z.string(), name: z.string(), content_type: z.string(), byte_len: z.number(), sha256: z.string(), created_at: z.string() });

export const PlanSummary = z.object({
  id: z.string(),
  object: z.literal('legacy_plan'),
  name: z.string(),
  status: Status,
  checkin_interval_seconds: z.number(),
  grace_seconds: z.number(),
  deadline_at: z.string().describe('Check in before this; after it the plan is in warning.'),
  warned_at: z.string().nullable(),
  release_earliest_at: z.string().nullable().describe('In warning: when the grace period ends (release then waits for the quorum, if any).'),
  released_at: z.string().nullable(),
  cancelled_at: z.string().nullable(),
  last_checkin_at: z.string().nullable(),
  created_at: z.string(),
  beneficiary_count: z.number(),
  attester_count: z.number(),
  quorum: z.number().nullable(),
  confirmations: z.number().describe('Attester confirmations counted in the current warning.'),
  object_count: z.number(),
  note_bytes: z.number(),
});

const Event = z.object({
  seq: z.number(),
  type: z.string(),
  at: z.string(),
  data: z.record(z.string(), z.unknown()),
  canonical: z.string().describe('RFC 8785 canonical JSON of {v, plan_id, seq, type, at, data, prev_hash}: the bytes hashed.'),
  prev_hash: z.string(),
  hash: z.string().describe('0x sha256 of canonical.'),
  anchor: AnchorFieldSchema,
});

export const PlanDetail = PlanSummary.extend({
  content_version: z.number(),
  beneficiaries: z.array(z.object({ wallet: z.string(), label: z.string().nullable(), claim_link: z.enum(['live', 'killed']), claimed_at: z.string().nullable() })),
  attesters: z.array(z.object({ wallet: z.string(), label: z.string().nullable(), confirmed_at: z.string().nullable() })),
  objects: z.array(ObjectMeta).describe('Metadata of the current files; never their content.'),
  events: z.array(Event).describe('The chained history, oldest first; content-free.'),
  head_hash: z.string(),
});

export const CreatedPlan = PlanDetail.extend({
  claim_links: z
    .array(z.object({ wallet: z.string(), label: z.string().nullable(), token: z.string(), claim_url: z.string(), api_url: z.string() }))
    .describe('One per beneficiary: shown this once, stored only as sha256. Give each to its beneficiary.'),
});

export const PlanList = z.object({
  plans: z.array(PlanSummary).describe(`Newest first, at most ${LIST_CAP}.`),
  max_active_plans: z.number().describe('How many plans an account keeps live (active or in warning) at once.'),
  custody: z.string().describe('Who holds the sealed content and what that means.'),
});

export const AttestingList = z.object({
  plans: z.array(
    z.object({
      id: z.string(),
      name: z.string(),
      status: Status,
      deadline_at: z.string(),
      release_earliest_at: z.string().nullable(),
      quorum: z.number().nullable(),
      your_confirmation: z.object({ wallet: z.string(), confirmed_at: z.string().nullable() }),
    }),
  ),
});

export const AttestResult = z.object({
  plan_id: z.string(),
  status: Status,
  wallet: z.string(),
  confirmed_at: z.string(),
  confirmations: z.number(),
  quorum: z.number().nullable(),
});

export const ClaimList = z.object({
  claims: z.array(
    z.object({ plan_id: z.string(), plan_name: z.string(), wallet: z.string(), released_at: z.string(), claimed_at: z.string().nullable(), objects: z.number(), note_bytes: z.number() }),
  ),
});

export const OpenedClaim = z.object({
  plan_id: z.string(),
  plan_name: z.string(),
  wallet: z.string(),
  released_at: z.string(),
  claimed_at: z.string(),
  note: z.string(),
  objects: z.array(ObjectMeta),
});

export const ReleasedObject = ObjectMeta.extend({ plan_id: z.string(), content_b64: z.string() });

export const PublicClaim = z.object({
  plan_name: z.string(),
  wallet_required: z.string().describe('The beneficiary wallet: sign in with it to open the claim once released.'),
  status: z.enum(['active', 'warning', 'released']),
});
