import type { Kysely } from 'kysely';
import { invalid, newId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Receipts, ReceiptRow } from '../proofs/receipts.ts';
import { checkClaim, type EscrowTerms } from './check.ts';
import { claimInputs } from './inputs.ts';
import { CLAIM_LIST_CAP, claimView, insertClaim, latestClaim, listClaims } from './store.ts';

/** The job-id field when the caller names none: the receipt's request id, its top-level `id`. */
export const DEFAULT_JOB_FIELD = 'id';

export const TRUST_MODEL =
  'claimable covers only the two preconditions the escrow contract checks on chain: the EIP-191 signature over the payload bytes ' +
  "recovers to this gateway's receipt signer, and the payload binds to the job id and the kind given here. The gateway reads no " +
  'chain: it does not state that an escrow for this job exists, is funded, is unpaid, names these terms and this signer, or will pay. ' +
  'Read the escrow on chain (escrowOf) before relying on a claim.';

export interface ClaimTermsInput {
  kind: string;
  job_field?: string | undefined;
  job_id?: string | undefined;
}

/**
 * Prepares escrow claims from the caller's own receipts. Owns the escrow_claims table (the trail); receipts
 * are read through the proofs module's Receipts, so another account's receipt is the same 404 as a missing one.
 */
export class EscrowClaims {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly signer: string,
    private readonly receipts: Receipts,
  ) {}

  /** Checks one of the account's receipts against the escrow's terms and records the prepared claim. */
  async prepare(accountId: string, requestId: string, input: ClaimTermsInput) {
    const row = await this.receipts.owned(accountId, requestId); // the uniform 404 before anything is written
    const terms = termsOf(input);
    const now = this.clock.now();
    const out = this.evaluate(row, terms, now);
    const id = newId('escl_');
    await insertClaim(this.db, {
      id,
      account_id: accountId,
      request_id: row.id,
      kind: terms.kind,
      job_field: terms.jobField,
      job_id: terms.jobId,
      claim_job_id: out.claim.args.jobId,
      claimable: out.claimable,
      reasons: JSON.stringify(out.reasons),
      signer: this.signer,
      recovered_address: out.checks.signature.recovered_address,
      payload_hash: out.claim.payload_hash,
      created_at: now,
    });
    return { id, ...out, prepared: null };
  }

  /**
   * The same check, recomputed now and stored nowhere. Terms come from the query when it names a kind, else
   * from the account's latest prepared claim for this receipt (which the answer also shows as prepared then).
   */
  async recheck(accountId: string, requestId: string, query: Partial<ClaimTermsInput>) {
    const row = await this.receipts.owned(accountId, requestId);
    const prior = await latestClaim(this.db, accountId, row.id);
    let input: ClaimTermsInput;
    if (query.kind !== undefined) input = { kind: query.kind, job_field: query.job_field, job_id: query.job_id };
    else if (query.job_field !== undefined || query.job_id !== undefined) throw invalid('querystring.kind: required with job_field or job_id', 'kind');
    else if (prior) input = { kind: prior.kind, job_field: prior.job_field, job_id: prior.job_id ?? undefined };
    else throw invalid('querystring.kind: required: no claim was prepared for this receipt to take the terms from', 'kind');
    return { id: null, ...this.evaluate(row, termsOf(input), this.clock.now()), prepared: prior ? claimView(prior) : null };
  }

  async list(accountId: string) {
    const rows = await listClaims(this.db, accountId);
    return { claims: rows.map(claimView), count: rows.length, cap: CLAIM_LIST_CAP, trust_model: TRUST_MODEL };
  }

  private evaluate(row: ReceiptRow, terms: EscrowTerms, now: Date) {
    const c = checkClaim({ payload: row.payload, signature: row.signature, signer: this.signer, terms });
    return {
      object: 'escrow.claim' as const,
      request_id: row.id,
      receipt_kind: row.kind,
      escrow: { kind: terms.kind, job_field: terms.jobField, job_id: terms.jobId },
      claimable: c.claimable,
      reasons: c.reasons,
      checks: { signature: c.signature, job: c.job, kind: c.kind },
      claim: claimInputs(row.payload, row.signature, c.job_id, this.signer),
      trust_model: TRUST_MODEL,
      checked_at: now.toISOString(),
    };
  }
}

function termsOf(input: ClaimTermsInput): EscrowTerms {
  return { kind: input.kind, jobField: input.job_field ?? DEFAULT_JOB_FIELD, jobId: input.job_id ?? null };
}
