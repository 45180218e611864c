import type { Insertable, Kysely, Selectable } from 'kysely';
import type { AttestationEvidenceTable, AttestationRecordsTable, DB } from '../../db/schema.ts';

export type RecordRow = Selectable<AttestationRecordsTable>;
export type EvidenceRow = Selectable<AttestationEvidenceTable>;

/** The account's newest version of an asset, if any. */
export function latestRecord(db: Kysely<DB>, accountId: string, assetId: string): Promise<RecordRow | undefined> {
  return db.selectFrom('attestation_records').selectAll().where('account_id', '=', accountId).where('asset_id', '=', assetId).orderBy('version', 'desc').limit(1).executeTakeFirst();
}

/** The account's versions of an asset, newest first. */
export function listRecords(db: Kysely<DB>, accountId: string, assetId: string, limit: number): Promise<RecordRow[]> {
  return db.selectFrom('attestation_records').selectAll().where('account_id', '=', accountId).where('asset_id', '=', assetId).orderBy('version', 'desc').limit(limit).execute();
}

/** One version of the account's asset. */
export function recordVersion(db: Kysely<DB>, accountId: string, assetId: string, version: number): Promise<RecordRow | undefined> {
  return db.selectFrom('attestation_records').selectAll().where('account_id', '=', accountId).where('asset_id', '=', assetId).where('version', '=', version).executeTakeFirst();
}

/** The newest version, of any account, whose every input is public (the public verification route). */
export function newestPublic(db: Kysely<DB>, assetId: string): Promise<RecordRow | undefined> {
  return db.selectFrom('attestation_records').selectAll().where('asset_id', '=', assetId).where('public_inputs', '=', true).orderBy('seq', 'desc').limit(1).executeTakeFirst();
}

export async function insertRecord(db: Kysely<DB>, row: Insertable<AttestationRecordsTable>, evidence: Array<Insertable<AttestationEvidenceTable>>): Promise<RecordRow> {
  const r = await db.insertInto('attestation_records').values(row).returningAll().executeTakeFirstOrThrow();
  if (evidence.length) await db.insertInto('attestation_evidence').values(evidence).execute();
  return r;
}

/** A version's evidence, with or without the bytes. */
export function evidenceOf(db: Kysely<DB>, recordId: string, withBodies: boolean): Promise<Array<Omit<EvidenceRow, 'body'> & { body?: Uint8Array | null }>> {
  const q = db.selectFrom('attestation_evidence').where('record_id', '=', recordId).orderBy('idx');
  return withBodies ? q.selectAll().execute() : q.select(['record_id', 'idx', 'name', 'request', 'sha256', 'read_at']).execute();
}

export async function recordCount(db: Kysely<DB>): Promise<number> {
  const r = await db.selectFrom('attestation_records').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}
