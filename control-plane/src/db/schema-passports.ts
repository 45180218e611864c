import type { Generated } from 'kysely';

/**
 * Passports (passports module) and KYA credentials (kya module).
 *
 * A handle is claimed once by one account and never released or reassigned: there is no delete. Each mint
 * adds a passport version at the handle; the handle row carries the current version's counts, which the
 * public directory ranks by.
 */
export interface PassportHandlesTable {
  handle: string;
  account_id: string;
  claimed_at: Date;
  current_version: number;
  verified_runs: number;
  receipts: number;
  updated_at: Date;
}

/** One minted passport: the signed credential and the exact commitment inputs, as canonical JSON text. */
export interface PassportsTable {
  handle: string;
  version: number;
  account_id: string;
  verified_runs: number;
  receipts: number;
  /** 0x sha256 of `inputs`. */
  commitment: string;
  /** RFC 8785 canonical JSON of the commitment inputs. */
  inputs: string;
  /** RFC 8785 canonical JSON of the signed passport document. */
  document: string;
  signature: string;
  signer: string;
  issued_at: Date;
}

/**
 * A KYA credential over a handle, bound to one API key. At most one per handle is current (superseded_at
 * null); a mint supersedes the current one in its own transaction. Revocation sets revoked_at.
 */
export interface KyaCredentialsTable {
  id: string;
  /** Mint order (newest first in lists, whatever the clock says). */
  seq: Generated<number>;
  handle: string;
  account_id: string;
  key_id: string;
  /** RFC 8785 canonical JSON of the signed credential document. */
  document: string;
  signature: string;
  signer: string;
  created_at: Date;
  superseded_at: Date | null;
  superseded_by: string | null;
  revoked_at: Date | null;
}
