import type { Scope } from '@svc/shared';

/**
 * The mandate document: the grant's terms, written as RFC 8785 canonical JSON. The gateway signs exactly
 * this text (EIP-191 personal_sign), and so does the owner's linked wallet when it co-signs, so both
 * signatures verify against the same bytes with any Ethereum library. Everything in it is known before the
 * mandate is written (the id is drawn first), so a wallet can sign it before the mandate exists.
 */
export interface MandateDocument {
  type: 'svc.mandate';
  version: 1;
  mandate_id: string;
  account_id: string;
  parent_key_id: string;
  purpose: string;
  scopes: Scope[];
  spend_cap_micro_usd: number;
  expires_at: string;
  /** null: any model. */
  allowed_models: string[] | null;
  /** null: any route the scopes open. */
  allowed_routes: string[] | null;
  /** The gateway's signer address, which countersigns. */
  gateway: string;
}

export type MandateStatus = 'active' | 'frozen' | 'expired' | 'revoked';

export interface MandateProofInput {
  document: MandateDocument;
  signature: string;
  owner: { address: string; signature: string } | null;
  keyId: string;
  keyPrefix: string;
  status: MandateStatus;
  spentMicroUsd: number;
  createdAt: Date;
  revokedAt: Date | null;
  signer: string;
  now: Date;
}

/**
 * The authorization certificate (POST /v1/mandates/:id/proof): the mandate document with both signatures,
 * the key it minted, and its status and spend at `generated_at`. Signed by the gateway like a receipt, so
 * POST /v1/receipts/verify and any Ethereum library verify it.
 */
export function proofDocument(i: MandateProofInput) {
  const cap = i.document.spend_cap_micro_usd;
  return {
    type: 'svc.mandate_proof' as const,
    version: 1 as const,
    mandate_id: i.document.mandate_id,
    account_id: i.document.account_id,
    key_id: i.keyId,
    key_prefix: i.keyPrefix,
    mandate: i.document,
    mandate_signature: i.signature,
    owner: i.owner,
    status: i.status,
    bounds: {
      spend_cap_micro_usd: cap,
      spent_micro_usd: i.spentMicroUsd,
      remaining_micro_usd: Math.max(0, cap - i.spentMicroUsd),
      expires_at: i.document.expires_at,
      scopes: i.document.scopes,
      allowed_models: i.document.allowed_models,
      allowed_routes: i.document.allowed_routes,
    },
    created_at: i.createdAt.toISOString(),
    revoked_at: i.revokedAt?.toISOString() ?? null,
    signer: i.signer,
    generated_at: i.now.toISOString(),
  };
}
