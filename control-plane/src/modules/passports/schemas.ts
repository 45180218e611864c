import { z } from 'zod';
import { AnchorFieldSchema, ChainAnchorSchema } from '../anchors/schemas.ts';
import { HANDLE_MAX, HANDLE_RULES } from './handles.ts';

/** Zod schemas of the passport routes. Response schemas are enforced (unknown keys are dropped), so they list every field. */

export const HandleParams = z.object({ handle: z.string().min(1).max(128) });

export const MintBody = z
  .object({
    handle: z
      .string()
      .max(HANDLE_MAX * 4)
      .describe(`The handle to claim (first mint) or the one the account holds (a re-mint). ${HANDLE_RULES}.`),
  })
  .strict();

export const SignedCredential = z.object({
  document: z.record(z.string(), z.unknown()).describe('The signed document, parsed from canonical.'),
  signature: z.string().describe('0x EIP-191 personal_sign signature of canonical.'),
  signer: z.string().describe('The gateway signer (GET /v1/receipts/pubkey).'),
  canonical: z.string().describe('The RFC 8785 canonical JSON that was signed.'),
  scheme: z.string(),
});

const Links = {
  url: z.string().describe('GET /v1/passport/:handle'),
  proof_url: z.string().describe('GET /v1/passport/:handle/proof'),
  registry_url: z.string().describe('GET /v1/registry/identity/:handle'),
  kya_url: z.string().describe('GET /v1/kya/public/:handle (404 while no KYA credential is current)'),
};

export const PassportView = z.object({
  object: z.literal('passport'),
  handle: z.string(),
  version: z.number().int().describe('1 at the first mint, +1 per re-mint.'),
  verified_runs: z.number().int(),
  receipts: z.number().int(),
  commitment: z.string().describe('0x sha256 of the RFC 8785 canonical JSON of the commitment inputs (see the proof route).'),
  issued_at: z.string(),
  credential: SignedCredential,
  anchor: AnchorFieldSchema,
  ...Links,
});

export const MintedPassport = PassportView.extend({
  claimed_now: z.boolean().describe('true when this call claimed the handle; false for a re-mint at the handle the account holds.'),
});

export const DirectoryEntry = z.object({
  handle: z.string(),
  version: z.number().int(),
  verified_runs: z.number().int(),
  receipts: z.number().int(),
  issued_at: z.string().describe('When the current passport was minted.'),
  url: z.string(),
});

export const Directory = z.object({
  agents: z.array(DirectoryEntry).describe('At most 500.'),
  count: z.number().int().describe('Entries in agents.'),
  ordered_by: z.string(),
});

const CommitmentInputs = z.object({
  type: z.literal('svc.passport.commitment'),
  v: z.literal(1),
  handle: z.string(),
  version: z.number().int(),
  account_id: z.string(),
  verified_runs: z.number().int(),
  receipts: z.number().int(),
  run_heads: z.array(z.string()),
  receipt_signer: z.string(),
  issued_at: z.string(),
});

export const PassportProof = z.object({
  object: z.literal('passport_proof'),
  handle: z.string(),
  version: z.number().int(),
  credential: SignedCredential,
  commitment_inputs: CommitmentInputs,
  commitment_canonical: z.string().describe('RFC 8785 canonical JSON of commitment_inputs: the exact bytes hashed.'),
  commitment_algorithm: z.string(),
  commitment: z.string(),
  anchor_state: AnchorFieldSchema.shape.state,
  batch_root: z.string().nullable().describe('null until the leader batches the commitment.'),
  leaf_index: z.number().int().nullable(),
  tree_size: z.number().int().nullable(),
  audit_path: z.array(z.string()).describe('RFC 6962 audit path: ordered sibling hashes, nearest the leaf first.'),
  tree: z.object({ algorithm: z.string(), leaf: z.string(), node: z.string(), split: z.string(), inclusion_proof: z.string() }),
  anchors: z.array(ChainAnchorSchema),
  anchor_document_url: z.string().nullable(),
  verify: z.array(z.string()),
});

export const IdentityDocument = z.object({
  type: z.string(),
  name: z.string(),
  description: z.string(),
  services: z.array(z.object({ name: z.string(), endpoint: z.string(), version: z.string() })),
  x402Support: z.boolean(),
  active: z.boolean(),
  registrations: z.array(z.object({ agentId: z.number(), agentRegistry: z.string() })).describe('Empty: no registry contract is deployed.'),
  supportedTrust: z.array(z.string()),
  erc8004: z.object({ registry_contract_deployed: z.literal(false), registered: z.literal(false), statement: z.string() }),
  passport: z.object({
    handle: z.string(),
    version: z.number().int(),
    verified_runs: z.number().int(),
    receipts: z.number().int(),
    commitment: z.string(),
    issued_at: z.string(),
    anchor_state: AnchorFieldSchema.shape.state,
    batch_root: z.string().nullable(),
    proof_url: z.string(),
  }),
  kya_credential_id: z.string().nullable().describe('The current KYA credential at the handle, if one is active.'),
});
