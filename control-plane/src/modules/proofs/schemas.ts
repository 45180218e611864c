import { z } from 'zod';
import { AnchorFieldSchema } from '../anchors/schemas.ts';
import { dateTime } from '../../http/fields.ts';

/** Zod schemas of the proofs routes. Response schemas are enforced (unknown keys are dropped), so they list every field. */

export const IdParams = z.object({ id: z.string().min(1).max(128) });

const Payload = z.record(z.string(), z.unknown()).describe('The signed receipt payload (metadata only), parsed from its canonical JSON.');

export const ReceiptView = z.object({
  id: z.string().describe('Receipt id: the request id of the billable response.'),
  usage_event_id: z.string(),
  kind: z.string(),
  payload: Payload.nullable().describe('null only when the stored text no longer parses.'),
  canonical: z.string().describe('The exact RFC 8785 canonical JSON that was signed.'),
  hash: z.string().describe('0x sha256 of canonical; run chains link these.'),
  signature: z.string().describe('EIP-191 personal_sign signature of canonical.'),
  signer: z.string().nullable().describe('Signer address named in the payload.'),
  run_id: z.string().nullable(),
  run_seq: z.number().nullable(),
  prev_hash: z.string().nullable(),
  shared: z.boolean(),
  created_at: z.string(),
});

export const SharedReceiptView = z.object({
  id: z.string(),
  kind: z.string(),
  payload: Payload.nullable(),
  canonical: z.string(),
  hash: z.string(),
  signature: z.string(),
  signer: z.string().nullable(),
  run_id: z.string().nullable(),
  run_seq: z.number().nullable(),
  prev_hash: z.string().nullable(),
  created_at: z.string(),
  verification: z.object({
    valid: z.boolean().describe('Checked on this request: the hash matches and the signature recovers to the current receipt signer.'),
    recovered_address: z.string().nullable(),
    signer: z.string().describe('The address of GET /v1/receipts/pubkey.'),
  }),
  page_url: z.string(),
});

export const ShareState = z.object({
  id: z.string(),
  shared: z.boolean(),
  url: z.string().describe('Public JSON address (GET /v1/receipts/shared/{id}); answers 404 while not shared.'),
  page_url: z.string().describe('Public page /r/{id}.'),
  badge_url: z.string().describe('Live SVG badge; answers 404 while not shared.'),
});

export const Pubkey = z.object({
  address: z.string(),
  scheme: z.literal('eip191-personal_sign'),
  curve: z.literal('secp256k1'),
  canonicalization: z.literal('RFC 8785'),
  hash: z.string(),
  headers: z.record(z.string(), z.string()).describe('Names of the signed receipt headers on billable responses.'),
});

export const VerifyBody = z.object({
  receipt: z
    .union([z.string(), z.record(z.string(), z.unknown())])
    .describe('The payload object, its canonical JSON text, or the base64url of that text (the x-svc-receipt header value).'),
  signature: z.string().describe('0x EIP-191 signature (65 bytes).'),
});

export const VerifyResult = z.object({
  valid: z.boolean().describe('True only when the signature recovers to this gateway\'s receipt signer.'),
  recovered_address: z.string().nullable(),
  payload: z.unknown().describe('The decoded payload, or null when it could not be decoded.'),
});

export const RunSummary = z.object({
  id: z.string(),
  receipt_count: z.number(),
  total_cost_micro_usd: z.number(),
  head_hash: z.string(),
  first_at: z.string(),
  last_at: z.string(),
});

export const RunReceipt = z.object({
  id: z.string(),
  seq: z.number().nullable(),
  kind: z.string(),
  hash: z.string(),
  prev_hash: z.string().nullable(),
  payload: Payload.nullable(),
  canonical: z.string(),
  signature: z.string(),
  created_at: z.string(),
});

export const RunDetail = RunSummary.extend({ receipts: z.array(RunReceipt).describe('Chained receipts in sequence order.') });

const Span = z.object({ first_at: z.string(), last_at: z.string(), seconds: z.number() });

const Signed = { signature: z.string(), signer: z.string(), canonical: z.string().describe('RFC 8785 canonical JSON of the document; the signature is EIP-191 over it.'), scheme: z.string() };

export const ProofDoc = z.object({
  type: z.literal('svc.run_proof'),
  version: z.literal(1),
  run_id: z.string(),
  account_id: z.string(),
  head_hash: z.string(),
  receipt_count: z.number(),
  total_cost_micro_usd: z.number(),
  span: Span,
  chain_valid: z.boolean(),
  failures: z.array(z.string()).describe('What did not recompute (empty when chain_valid); at most 50.'),
  anchor: AnchorFieldSchema,
  signer: z.string(),
  generated_at: z.string(),
});
export const SignedProof = z.object({ proof: ProofDoc, ...Signed });

export const FRAMEWORKS = ['eu_ai_act', 'soc2'] as const;
export const AuditQuery = z.object({ framework: z.enum(FRAMEWORKS).optional().describe('Adds an evidence mapping for eu_ai_act or soc2 (never a certification).') });

const AuditReceipt = z.object({
  id: z.string(),
  seq: z.number().nullable(),
  kind: z.string(),
  route: z.string().nullable(),
  model: z.string().nullable(),
  key_id: z.string().nullable(),
  cost_micro_usd: z.number().nullable(),
  created_at: z.string(),
  hash: z.string(),
  prev_hash: z.string().nullable(),
});

const EvidenceItem = z.object({
  control: z.string(),
  title: z.string(),
  evidence: z.array(z.string()),
  status: z.enum(['evidence_present', 'partial', 'evidence_absent', 'integrity_failed']),
});

export const AuditDoc = z.object({
  type: z.literal('svc.audit_pack'),
  version: z.literal(1),
  content_policy: z.string(),
  run: RunSummary.extend({ account_id: z.string(), span_seconds: z.number() }),
  receipts: z.array(AuditReceipt),
  integrity: z.object({ chain_valid: z.boolean(), receipts_checked: z.number(), failures: z.array(z.string()), signer: z.string() }),
  totals_by_kind: z.array(z.object({ kind: z.string(), receipts: z.number(), cost_micro_usd: z.number() })),
  framework: z.enum(FRAMEWORKS).nullable(),
  evidence_mapping: z.array(EvidenceItem).optional(),
  disclaimer: z.string().optional(),
  generated_at: z.string(),
});
export const SignedAudit = z.object({ audit: AuditDoc, ...Signed });

export const SlaBody = z
  .object({
    from: dateTime({ offset: 'required' }).optional().describe('ISO 8601; default: 30 days before `to`.'),
    to: dateTime({ offset: 'required' }).optional().describe('ISO 8601; default: now. A future `to` is clamped to now.'),
  })
  .strict();

export const SlaDoc = z.object({
  type: z.literal('svc.sla_report'),
  version: z.literal(1),
  account_id: z.string(),
  window: z.object({ from: z.string(), to: z.string(), seconds: z.number(), clamped_to_now: z.boolean() }),
  sample_interval_seconds: z.number(),
  samples_expected: z.number(),
  samples_healthy: z.number(),
  uptime_ratio: z.number().nullable(),
  method: z.string(),
  current: z.object({ status: z.enum(['ok', 'degraded']), database_ok: z.boolean(), last_sample_at: z.string().nullable(), last_sample_ok: z.boolean().nullable() }),
  generated_at: z.string(),
});
export const SignedSla = z.object({ report: SlaDoc, ...Signed });
