import { z } from 'zod';
import { AnchorFieldSchema } from '../anchors/schemas.ts';
import { CALLS_CAP } from './commitment.ts';

/** Fields the gateway makes itself: a body naming one is refused with a message that says so. */
const SERVER_MADE = new Set(['salt', 'salt_hex', 'commitment']);

export const MAX_TEXT_CHARS = 65_536;

export const CommitBody = z.strictObject(
  {
    text: z
      .string()
      .min(1)
      .max(MAX_TEXT_CHARS)
      .refine((s) => !/\p{Surrogate}/u.test(s), 'must be well-formed Unicode (no lone surrogate): the commitment covers its UTF-8 bytes')
      .describe(`The text committed to, 1 to ${MAX_TEXT_CHARS} characters. Sealed at rest; shown again only by a reveal.`),
  },
  {
    error: (iss) => {
      if (iss.code !== 'unrecognized_keys') return undefined;
      const made = iss.keys.find((k) => SERVER_MADE.has(k));
      return made ? `Unrecognized key: "${made}": the gateway draws the salt and computes the commitment itself; send only text` : undefined;
    },
  },
);

export const CallParams = z.object({ id: z.string().min(1).max(64) });

export const CallReceipt = z.object({
  id: z.string().describe('The request id of the commit.'),
  payload: z.record(z.string(), z.unknown()),
  canonical: z.string().describe('RFC 8785 canonical JSON of the payload: the exact text signed.'),
  hash: z.string().describe('0x sha256 of the canonical text.'),
  signature: z.string().describe('EIP-191 personal_sign of the canonical text by the receipt signer (GET /v1/receipts/pubkey).'),
  signer: z.string(),
});

export const CallView = z.object({
  id: z.string(),
  object: z.literal('sealed_call'),
  state: z.enum(['committed', 'revealed', 'withdrawn']),
  commitment: z.string().describe('0x-hex sha256(salt || UTF-8 text).'),
  created_at: z.string(),
  revealed_at: z.string().nullable(),
  withdrawn_at: z.string().nullable(),
  receipt: CallReceipt,
  anchor: AnchorFieldSchema.describe('The public anchor of the commitment (the leaf is the commitment).'),
  public_url: z.string(),
  page_url: z.string().describe('The public page /c/{id}, which verifies receipt and commitment in the browser.'),
});

export const RevealedCall = CallView.extend({
  text: z.string(),
  salt_hex: z.string().describe('The 32 salt bytes as 64 hex digits.'),
});

export const PublicCall = CallView.extend({
  text: z.string().nullable().describe('Only while revealed.'),
  salt_hex: z.string().nullable().describe('Only while revealed.'),
  commitment_scheme: z.string(),
  trust_model: z.string(),
});

export const CallList = z.object({
  calls: z.array(CallView).describe('Newest first, content-free.'),
  count: z.number().int(),
  cap: z.literal(CALLS_CAP).describe('The most calls an account holds; the list is complete up to it.'),
  trust_model: z.string().describe('What a commitment proves and what it does not.'),
});
