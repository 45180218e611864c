import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB, SupportClaimsTable, SupportNoncesTable } from '../../db/schema.ts';

export type ClaimRow = Selectable<SupportClaimsTable>;

export async function insertNonce(db: Kysely<DB>, row: Insertable<SupportNoncesTable>): Promise<void> {
  await db.insertInto('support_nonces').values(row).execute();
}

export async function nonceRow(db: Kysely<DB>, nonce: string) {
  return db.selectFrom('support_nonces').selectAll().where('nonce', '=', nonce).executeTakeFirst();
}

/** Marks the nonce used if it is unused and unexpired; false when another request used it first or it expired. */
export async function useNonce(db: Kysely<DB>, nonce: string, now: Date): Promise<boolean> {
  const r = await db.updateTable('support_nonces').set({ used_at: now }).where('nonce', '=', nonce).where('used_at', 'is', null).where('expires_at', '>', now).executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

export async function insertClaim(db: Kysely<DB>, row: Insertable<SupportClaimsTable>): Promise<ClaimRow> {
  return db.insertInto('support_claims').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function claimByAddress(db: Kysely<DB>, address: string): Promise<ClaimRow | undefined> {
  return db.selectFrom('support_claims').selectAll().where('solana_address', '=', address).executeTakeFirst();
}

export async function claimByTx(db: Kysely<DB>, tx: string): Promise<ClaimRow | undefined> {
  return db.selectFrom('support_claims').selectAll().where('tx_signature', '=', tx).executeTakeFirst();
}

/** Deletes nonces past their expiry that no claim used. */
export async function purgeNonces(db: Kysely<DB>, now: Date): Promise<number> {
  const r = await db.deleteFrom('support_nonces').where('expires_at', '<=', now).where('used_at', 'is', null).executeTakeFirst();
  return Number(r.numDeletedRows);
}
