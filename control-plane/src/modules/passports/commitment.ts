import { canonicalize, sha256Hex } from '@svc/shared';
import type { ProvableHistory } from '../proofs/history.ts';

/**
 * The passport commitment: 0x-hex SHA-256 of the RFC 8785 canonical JSON of `CommitmentInputs`. Every input
 * is served by GET /v1/passport/:handle/proof, so anyone recomputes it with any JCS library and SHA-256:
 *
 *   commitment = "0x" + hex(SHA-256(UTF-8(JCS(commitment_inputs))))
 *
 * It is the leaf queued for the public anchor (kind `passport`), and the signed passport names it.
 */
export interface CommitmentInputs {
  type: 'svc.passport.commitment';
  v: 1;
  handle: string;
  /** The passport's version at its handle (1 for the first mint, then +1 per mint). */
  version: number;
  /** The account the handle belongs to: the `account_id` every one of its signed receipts carries. */
  account_id: string;
  verified_runs: number;
  receipts: number;
  /** Head hashes of the verified runs, ascending; exactly `verified_runs` of them. */
  run_heads: string[];
  /** The address the receipts were verified against (GET /v1/receipts/pubkey). */
  receipt_signer: string;
  issued_at: string;
}

export const COMMITMENT_ALGORITHM = 'sha256(rfc8785(commitment_inputs))';

export function commitmentInputs(handle: string, version: number, accountId: string, h: ProvableHistory, receiptSigner: string, issuedAt: Date): CommitmentInputs {
  return {
    type: 'svc.passport.commitment',
    v: 1,
    handle,
    version,
    account_id: accountId,
    verified_runs: h.verified_runs,
    receipts: h.receipts,
    run_heads: [...h.run_heads],
    receipt_signer: receiptSigner,
    issued_at: issuedAt.toISOString(),
  };
}

export function commitmentOf(canonicalInputs: string): string {
  return `0x${sha256Hex(canonicalInputs)}`;
}

export function canonicalInputs(inputs: CommitmentInputs): string {
  return canonicalize(inputs);
}

/** The signed passport credential. */
export interface PassportDocument {
  type: 'svc.passport';
  v: 1;
  handle: string;
  version: number;
  account_id: string;
  verified_runs: number;
  receipts: number;
  commitment: string;
  commitment_algorithm: typeof COMMITMENT_ALGORITHM;
  issued_at: string;
  signer: string;
}

export function passportDocument(inputs: CommitmentInputs, commitment: string, signer: string): PassportDocument {
  return {
    type: 'svc.passport',
    v: 1,
    handle: inputs.handle,
    version: inputs.version,
    account_id: inputs.account_id,
    verified_runs: inputs.verified_runs,
    receipts: inputs.receipts,
    commitment,
    commitment_algorithm: COMMITMENT_ALGORITHM,
    issued_at: inputs.issued_at,
    signer,
  };
}
