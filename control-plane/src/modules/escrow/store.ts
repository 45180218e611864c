import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB, EscrowClaimsTable } from '../../db/schema.ts';

export type ClaimRow = Selectable<EscrowClaimsTable>;

/** The trail list returns the newest claims up to this many (a single page, like the other capped lists). */
export const CLAIM_LIST_CAP = 200;

export async function insertClaim(db: Kysely<DB>, row: Insertable<EscrowClaimsTable>): Promise<void> {
  await db.insertInto('escrow_claims').values(row).execute();
}

/** The account's prepared claims, newest first, at most CLAIM_LIST_CAP. */
export function listClaims(db: Kysely<DB>, accountId: string): Promise<ClaimRow[]> {
  return db.selectFrom('escrow_claims').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(CLAIM_LIST_CAP).execute();
}

/** The account's latest prepared claim for one receipt, if any. */
export function latestClaim(db: Kysely<DB>, accountId: string, requestId: string): Promise<ClaimRow | undefined> {
  return db
    .selectFrom('escrow_claims')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('request_id', '=', requestId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** A stored claim as the trail shows it: the verdict as prepared then. */
export function claimView(row: ClaimRow) {
  return {
    id: row.id,
    object: 'escrow.claim' as const,
    request_id: row.request_id,
    kind: row.kind,
    job_field: row.job_field,
    job_id: row.job_id,
    claim_job_id: row.claim_job_id,
    claimable: row.claimable,
    reasons: row.reasons,
    signer: row.signer,
    recovered_address: row.recovered_address,
    payload_hash: row.payload_hash,
    created_at: row.created_at.toISOString(),
  };
}
