import { z } from 'zod';
import { AnchorFieldSchema } from '../anchors/schemas.ts';
import { MAX_AMOUNT } from './core.ts';
import { ASSET_CLASSES, SEALED_FIELDS } from './fields.ts';

export const Amount = z.number().int().min(1).max(MAX_AMOUNT);
export const IdParams = z.object({ id: z.string().min(1).max(64) });

export const AssetBody = z.strictObject({
  name: z.string().trim().min(1).max(200).describe('Sealed; shown to the asset\'s parties and on its claim links.'),
  asset_class: z.enum(ASSET_CLASSES).describe('Sealed.'),
  description: z.string().max(4000).optional().describe('Sealed.'),
  identifier: z.string().max(200).optional().describe('An outside identifier (ISIN, registry number, ...); sealed.'),
  jurisdiction: z.string().max(100).optional().describe('Sealed.'),
  terms: z.string().max(20_000).optional().describe('Sealed.'),
  issued_micro_usd: Amount.describe('The whole issue in micro-USD, held by the issuer at first; sealed. Positions plus pending claims always sum to it.'),
});

export const Roles = z.array(z.enum(['issuer', 'holder', 'attester']));

export const AssetView = z.object({
  id: z.string(),
  object: z.literal('vault_asset'),
  state: z.enum(['open', 'closed']),
  roles: Roles.describe("The caller's parts in the asset."),
  name: z.string(),
  asset_class: z.string(),
  description: z.string().nullable(),
  identifier: z.string().nullable(),
  jurisdiction: z.string().nullable(),
  terms: z.string().nullable(),
  issued_micro_usd: z.number().nullable().describe('The issuer only; null for other parties.'),
  sealed_fields: z.array(z.enum(SEALED_FIELDS)).describe('The fields stored sealed, each under its own nonce.'),
  created_at: z.string(),
  closed_at: z.string().nullable(),
  chain_length: z.number().int(),
  chain_head: z.string(),
  chain_url: z.string(),
  anchors_url: z.string(),
});

export const ChainEventView = z.object({
  seq: z.number().int(),
  type: z.string(),
  at: z.string(),
  payload_sha256: z.string(),
  prev_hash: z.string(),
  hash: z.string(),
});

export const AssetDetail = AssetView.extend({
  events: z.array(ChainEventView.extend({ payload: z.record(z.string(), z.unknown()).nullable().describe("The event's sealed payload, opened for the issuer; null for other parties.") })),
});

export const AssetList = z.object({ assets: z.array(AssetView).describe('Newest first; complete.') });

export const PublicChain = z.object({
  object: z.literal('vault_chain'),
  asset_id: z.string(),
  length: z.number().int(),
  head: z.string(),
  genesis: z.string(),
  hash_rule: z.string(),
  events: z.array(ChainEventView),
});

export const AnchorBatch = z.object({
  object: z.literal('vault_anchor_batch'),
  asset_id: z.string(),
  root: z.string().describe('RFC 6962 root over event_hashes, in order: the leaf this asset puts in the public anchors.'),
  event_count: z.number().int(),
  event_hashes: z.array(z.string()),
  tree: z.object({ algorithm: z.string(), leaf: z.string(), node: z.string(), split: z.string(), inclusion_proof: z.string() }),
  anchor: AnchorFieldSchema.describe("The root's public anchor: its batch root, audit path and each backend's transaction (an EVM tx hash, a Solana signature)."),
  anchor_document_url: z.string().nullable(),
});
