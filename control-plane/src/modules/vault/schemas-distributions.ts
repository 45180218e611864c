import { z } from 'zod';
import { Amount } from './schemas-assets.ts';

export const DistributeBody = z.strictObject({
  amount_micro_usd: Amount.describe('The payout to allocate pro rata over current positions.'),
  memo: z.string().max(500).optional().describe('Sealed.'),
});

export const DistributionView = z.object({
  id: z.string(),
  object: z.literal('vault_distribution'),
  asset_id: z.string(),
  asset_name: z.string(),
  seen_as: z.enum(['issuer', 'holder']).describe('The issuer reads the whole record; a holder the amount, the rule and their own allocation.'),
  amount_micro_usd: z.number(),
  basis_micro_usd: z.number().nullable().describe('The sum of positions allocated over.'),
  allocated_micro_usd: z.number().nullable(),
  remainder_micro_usd: z.number().nullable().describe('amount - allocated: allocated to no one.'),
  holder_count: z.number().nullable(),
  rounding: z.string(),
  memo: z.string().nullable(),
  allocations: z.array(z.object({ account_id: z.string(), position_micro_usd: z.number(), amount_micro_usd: z.number() })),
  chain_seq: z.number().int(),
  created_at: z.string(),
});

export const DistributionList = z.object({ distributions: z.array(DistributionView).describe('Newest first, at most 200.') });
export const DistributionQuery = z.object({ asset_id: z.string().min(1).max(64).optional() });
