import type { Json } from './schema-json.ts';

/**
 * Prepared escrow claims (escrow module): the trail of POST /v1/escrow/claims, one row per call. A row keeps
 * the verdict as it was prepared; GET /v1/escrow/claims/{request_id} recomputes it. No receipt content: the
 * receipt stays in the receipts table, named here by its request id and the sha256 of its payload.
 */
export interface EscrowClaimsTable {
  id: string;
  account_id: string;
  /** The receipt's request id. */
  request_id: string;
  /** The escrow's expected receipt kind as given; "" means the receipt must declare none. */
  kind: string;
  job_field: string;
  /** The escrow's job id as given, or null when the receipt's own value was taken. */
  job_id: string | null;
  /** The job id the assembled claim names (null when none could be named). */
  claim_job_id: string | null;
  claimable: boolean;
  reasons: Json<Array<{ code: string; message: string }>>;
  signer: string;
  recovered_address: string | null;
  /** 0x sha256 of the payload the claim carries (the receipt's canonical text). */
  payload_hash: string;
  created_at: Date;
}
