import { z } from 'zod';
import { dateTime } from '../../http/fields.ts';
import { ATTESTER_ROLES } from './attesters.ts';
import { Amount } from './schemas-assets.ts';

const Address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address');
const Signature = z.string().regex(/^0x[0-9a-fA-F]{130}$/, 'must be an EIP-191 signature: 0x and 65 bytes of hex').describe("The recorder's wallet's EIP-191 signature of the attester message (docs/vault.md); verified on submit.");

export const AttesterBody = z.strictObject({
  role: z.enum(ATTESTER_ROLES),
  account_id: z.string().min(1).max(64).optional().describe('Name an account ...'),
  wallet: Address.optional().describe('... or a wallet: whichever account links it takes the role.'),
});

export const AttesterView = z.object({
  id: z.string(),
  object: z.literal('vault_attester'),
  asset_id: z.string(),
  role: z.enum(ATTESTER_ROLES),
  account_id: z.string().nullable(),
  wallet: z.string().nullable(),
  state: z.enum(['active', 'revoked']),
  created_at: z.string(),
  revoked_at: z.string().nullable(),
});
export const AttesterList = z.object({ attesters: z.array(AttesterView), asset_id: z.string(), roles: z.array(z.enum(ATTESTER_ROLES)) });
export const AttesterParams = z.object({ id: z.string().min(1).max(64), attester_id: z.string().min(1).max(64) });

export const StatementBody = z.strictObject({
  statement: z.string().min(1).max(20_000).describe('Sealed at rest; the issuer, holders and attesters read it.'),
  role: z.enum(ATTESTER_ROLES).optional().describe('The role recorded in, when you hold several on this asset.'),
  attester_signature: Signature.optional(),
});

export const FigureBody = z.strictObject({
  kind: z.enum(['nav', 'reserves']),
  value_micro_usd: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  as_of: dateTime().describe('When the figure holds; not in the future.'),
  basis: z.string().max(4000).optional().describe('How it was reached; sealed, its sha256 signed.'),
  role: z.enum([...ATTESTER_ROLES, 'issuer']).optional().describe('The issuer records as `issuer` by default; an attester in one of their roles.'),
  attester_signature: Signature.optional(),
});

export const AttestationView = z.object({
  id: z.string(),
  object: z.literal('vault_attestation'),
  asset_id: z.string(),
  kind: z.enum(['statement', 'nav', 'reserves']),
  role: z.string(),
  attester_id: z.string().nullable(),
  recorded_by_account_id: z.string(),
  statement: z.string().nullable(),
  basis: z.string().nullable(),
  value_micro_usd: z.number().nullable(),
  as_of: z.string().nullable(),
  attester_address: z.string().nullable().describe("The wallet that co-signed (document.attester), if any."),
  document: z.record(z.string(), z.unknown()).describe('The signed document; its `attester.message` is what the wallet signed.'),
  canonical: z.string().describe('RFC 8785 canonical JSON of document: the exact text the gateway signed.'),
  signature: z.string(),
  signer: z.string(),
  scheme: z.string(),
  chain_seq: z.number().int(),
  created_at: z.string(),
});
export const AttestationList = z.object({ attestations: z.array(AttestationView).describe('Newest first; complete.'), asset_id: z.string(), trust_model: z.string() });

export const ProofBody = z.strictObject({
  asset_id: z.string().min(1).max(64),
  statement: z.literal('holds_at_least').default('holds_at_least'),
  amount_micro_usd: Amount.describe('N: the proof states that you hold at least this much.'),
  wallet: Address.optional().describe('The wallet the proof names; one linked to your account. Default: the session\'s wallet.'),
});

export const ProofView = z.object({
  proof: z.object({
    type: z.literal('svc.vault_disclosure'),
    version: z.literal(1),
    proof_id: z.string(),
    statement: z.literal('holds_at_least'),
    subject: z.object({ wallet: z.string() }),
    asset_id: z.string(),
    amount_micro_usd: z.number(),
    as_of: z.string(),
    chain: z.object({ length: z.number().int(), head: z.string() }),
    discloses: z.string(),
    signer: z.string(),
  }),
  canonical: z.string(),
  signature: z.string(),
  signer: z.string(),
  scheme: z.string(),
  verify: z.string(),
});
