import { z } from 'zod';

export const ChainAnchorSchema = z.object({
  backend: z.string(),
  type: z.enum(['evm', 'solana']),
  chain_id: z.number(),
  state: z.enum(['pending', 'anchored', 'failed']),
  from: z.string(),
  tx_hash: z.string().nullable(),
  block_number: z.number().nullable(),
  block_hash: z.string().nullable(),
  anchored_at: z.string().nullable(),
});

/** An artifact's `anchor` field. */
export const AnchorFieldSchema = z.object({
  state: z.enum(['pending', 'anchored', 'failed', 'not_anchored']),
  hash: z.string(),
  root: z.string().nullable(),
  leaf_index: z.number().nullable(),
  tree_size: z.number().nullable(),
  proof: z.array(z.string()),
  anchors: z.array(ChainAnchorSchema),
});

export const AnchorDocumentSchema = z.object({
  root: z.string(),
  leaf_count: z.number(),
  leaves: z.array(z.string()),
  created_at: z.string(),
  tree: z.object({ algorithm: z.string(), leaf: z.string(), node: z.string(), split: z.string(), inclusion_proof: z.string() }),
  state: z.enum(['pending', 'anchored', 'failed', 'not_anchored']),
  anchors: z.array(ChainAnchorSchema.extend({ attempts: z.number(), last_error: z.string().nullable(), verify: z.string() })),
});
