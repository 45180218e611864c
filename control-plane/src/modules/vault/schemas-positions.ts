import { z } from 'zod';
import { Amount } from './schemas-assets.ts';

const Address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address');

export const HoldersView = z.object({
  holders: z.array(z.object({ account_id: z.string(), wallet: z.string().nullable().describe("The holder's first linked wallet."), amount_micro_usd: z.number() })).describe('Largest first; complete.'),
  asset_id: z.string(),
  total_micro_usd: z.number().describe('The sum of positions.'),
  pending_claims_micro_usd: z.number().describe('Sent to wallets without an account and not settled yet.'),
  issued_micro_usd: z.number().describe('Always total + pending claims.'),
});

export const TransferBody = z.strictObject({
  asset_id: z.string().min(1).max(64),
  to_wallet: Address.describe("The recipient's wallet. Linked to an account: that account's position grows at once. Linked to none: a claim waits for it."),
  amount_micro_usd: Amount,
  memo: z.string().max(500).optional().describe('Sealed; the sender, the recipient and the issuer read it.'),
});

export const TransferView = z.object({
  id: z.string(),
  object: z.literal('vault_transfer'),
  asset_id: z.string(),
  asset_name: z.string(),
  from_account_id: z.string(),
  to_wallet: z.string(),
  to_account_id: z.string().nullable().describe('null while a claim waits.'),
  amount_micro_usd: z.number(),
  memo: z.string().nullable(),
  status: z.enum(['settled', 'claim_pending', 'claim_settled', 'claim_cancelled']),
  claim_id: z.string().nullable(),
  chain_seq: z.number().int(),
  created_at: z.string(),
});

export const NewTransfer = TransferView.extend({
  claim: z
    .object({
      id: z.string(),
      state: z.literal('pending'),
      token: z.string().describe('The claim secret, shown this once (stored as sha256).'),
      claim_url: z.string().describe('Public: the asset name and the bound wallet, never the amount.'),
      settle_url: z.string().describe('POST with a session whose account holds the wallet.'),
    })
    .nullable(),
});

export const TransferList = z.object({ transfers: z.array(TransferView).describe('Sent, received, or of an asset you issued; newest first, at most 100.') });
export const TransferQuery = z.object({ asset_id: z.string().min(1).max(64).optional() });

export const Portfolio = z.object({
  object: z.literal('vault_portfolio'),
  account_id: z.string(),
  holdings: z.array(z.object({ asset_id: z.string(), name: z.string(), state: z.enum(['open', 'closed']), amount_micro_usd: z.number() })),
  total_micro_usd: z.number(),
  pending_claims_sent_micro_usd: z.number(),
  recent_activity: z.array(
    z.object({ kind: z.enum(['transfer_sent', 'transfer_received', 'distribution']), id: z.string(), asset_id: z.string(), asset_name: z.string(), amount_micro_usd: z.number(), status: z.string(), at: z.string() }),
  ),
});

export const ClaimView = z.object({
  id: z.string(),
  object: z.literal('vault_claim'),
  asset_id: z.string(),
  asset_name: z.string(),
  transfer_id: z.string(),
  wallet: z.string(),
  amount_micro_usd: z.number(),
  state: z.enum(['pending', 'settled', 'cancelled']),
  created_at: z.string(),
  settled_at: z.string().nullable(),
  settled_account_id: z.string().nullable(),
  cancelled_at: z.string().nullable(),
});
export const SettledClaim = ClaimView.extend({ position_micro_usd: z.number().describe("The caller's position in the asset after settling.") });
export const ClaimList = z.object({ claims: z.array(ClaimView).describe('Claims you sent, newest first; complete.') });
export const ClaimLink = z.object({
  object: z.literal('vault_claim_link'),
  asset_name: z.string(),
  wallet: z.string().describe('The wallet that may settle it.'),
  state: z.enum(['pending', 'settled']),
  created_at: z.string(),
  settle: z.string(),
});
export const TokenParams = z.object({ token: z.string().min(1).max(200) });
