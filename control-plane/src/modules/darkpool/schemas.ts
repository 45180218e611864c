import { z } from 'zod';
import { ASSET_ID } from '../../config/darkpool.ts';
import { PRICE_MAX, SIZE_MAX } from './terms.ts';

export const IntentBody = z.strictObject({
  asset_id: z.string().regex(ASSET_ID, 'must be an asset id: letters, digits, . _ : - (at most 64, starting with a letter or digit)').describe('The asset; sealed.'),
  side: z.enum(['buy', 'sell']).describe('Sealed.'),
  size: z.number().int().min(1).max(SIZE_MAX).describe('Whole units of the asset; sealed.'),
  limit_price_micro_usd: z.number().int().min(1).max(PRICE_MAX).describe('The worst price per unit you accept, in micro-USD (USDT); sealed. Size times limit is at most $1e9.'),
  settlement_address: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte EVM address')
    .describe("Where you settle: a seller receives the USDT here, a buyer the asset. Sealed; shown to the counterparty only after both confirm."),
});
export const IdParams = z.object({ id: z.string().min(1).max(64) });
export const AssetParams = z.object({ asset_id: z.string().min(1).max(100) });
export const MatchBody = z.strictObject({ intent_id: z.string().min(1).max(100).describe('One of your intents.') });
export const SettleBody = z.strictObject({ tx_hash: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte transaction hash').describe('The USDT transfer you made to the seller.') });

const Terms = z.object({ asset_id: z.string(), side: z.enum(['buy', 'sell']), size: z.number(), limit_price_micro_usd: z.number(), settlement_address: z.string() });

export const IntentView = z.object({
  id: z.string(),
  object: z.literal('intent'),
  state: z.enum(['resting', 'matched', 'withdrawn']),
  terms: Terms.describe('Opened for you only; sealed at rest.'),
  match_id: z.string().nullable(),
  created_at: z.string(),
  matched_at: z.string().nullable(),
  withdrawn_at: z.string().nullable(),
  history: z.array(z.object({ seq: z.number(), type: z.string(), at: z.string(), data: z.record(z.string(), z.unknown()) })).describe('Append-only, oldest first.'),
});

const Signed = z.object({
  document: z.record(z.string(), z.unknown()),
  canonical: z.string().describe('RFC 8785 canonical JSON: the exact text signed.'),
  signature: z.string().describe('EIP-191 personal_sign by the receipt signer (GET /v1/receipts/pubkey).'),
  signer: z.string(),
  scheme: z.string(),
});

export const MatchView = z.object({
  id: z.string(),
  object: z.literal('match'),
  status: z.enum(['pending', 'confirmed', 'settled']),
  your_side: z.enum(['buy', 'sell']),
  your_intent_id: z.string(),
  asset_id: z.string(),
  size: z.number(),
  price_micro_usd: z.number(),
  amount_micro_usd: z.number(),
  crossing_rule: z.string(),
  your_settlement_address: z.string(),
  you_confirmed_at: z.string().nullable(),
  counterparty_confirmed: z.boolean(),
  counterparty_settlement_address: z.string().nullable().describe('Only once both sides confirmed.'),
  settlement_instruction: Signed.nullable().describe('Signed once both sides confirmed: who pays what to whom, on which chain.'),
  settlement: Signed.nullable().describe('The signed settlement receipt: cash leg VERIFIED, asset leg UNAVAILABLE.'),
  settlement_pending: z.object({ tx_hash: z.string(), confirmations: z.number(), required_confirmations: z.number() }).nullable(),
  created_at: z.string(),
  confirmed_at: z.string().nullable(),
  settled_at: z.string().nullable(),
});

export const MatchResult = z.object({
  object: z.literal('match_result'),
  matched: z.boolean(),
  match: MatchView.nullable().describe('The match, when one was made (or your intent was already matched); null otherwise.'),
});

export const MarketStatus = z.object({
  asset_id: z.string(),
  object: z.literal('market_status'),
  eligible: z.boolean(),
  reason: z.string().nullable(),
  rules: z.object({
    assets: z.string(),
    sides: z.array(z.string()),
    size: z.object({ min: z.number(), max: z.number(), unit: z.string() }),
    limit_price_micro_usd: z.object({ min: z.number(), max: z.number() }),
    max_notional_micro_usd: z.number(),
    max_resting_intents: z.number(),
    crossing_rule: z.string(),
    self_match: z.string(),
    cash_leg: z.object({ chain: z.string(), chain_id: z.number(), token: z.string(), decimals: z.number(), confirmations: z.number(), paid_by: z.string(), paid_to: z.string() }),
    asset_leg: z.string(),
  }),
  your_participation: z.object({ intents: z.array(z.object({ id: z.string(), side: z.enum(['buy', 'sell']), state: z.string(), match_id: z.string().nullable(), created_at: z.string() })) }),
  disclosure: z.string(),
});
