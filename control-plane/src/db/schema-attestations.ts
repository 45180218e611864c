import type { Generated } from 'kysely';

/**
 * One signed version of an attestation (attestations module): what was checked (`spec`), the signed
 * document (RFC 8785 canonical JSON, EIP-191 signature) and where it stands. Never updated: a refresh adds
 * the next version.
 */
export interface AttestationRecordsTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  key_id: string | null;
  /** eip155:<chain id>:<address>. */
  asset_id: string;
  version: number;
  subject_ref: string;
  status_at_check: 'VERIFIED' | 'DISCREPANCY' | 'UNAVAILABLE';
  /** Every input is re-readable by anyone on chain: the public verification route may serve it. */
  public_inputs: boolean;
  /** The check as JSON (CheckSpec), run again by a refresh. */
  spec: string;
  document: string;
  /** 0x-hex sha256 of `document`. */
  document_sha256: string;
  signature: string;
  /** The metered receipt of the check or refresh that made this version. */
  receipt_id: string;
  checked_at: Date;
  fresh_until: Date;
}

/** The exact bytes one source answered for a version (its evidence), in the order of the record's readings. */
export interface AttestationEvidenceTable {
  record_id: string;
  idx: number;
  name: string;
  request: string;
  body: Uint8Array | null;
  sha256: string | null;
  read_at: Date;
}
