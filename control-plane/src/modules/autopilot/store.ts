import type { Insertable, Kysely, Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { AutopilotProposalsTable } from '../../db/schema-autopilot.ts';

export type ProposalRow = Selectable<AutopilotProposalsTable>;

export async function insertProposals(db: Kysely<DB>, rows: Insertable<AutopilotProposalsTable>[]): Promise<ProposalRow[]> {
  return rows.length ? db.insertInto('autopilot_proposals').values(rows).returningAll().execute() : [];
}

export const ownedProposal = (db: Kysely<DB>, accountId: string, id: string) => db.selectFrom('autopilot_proposals').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();

export const listProposals = (db: Kysely<DB>, accountId: string, cap: number) => db.selectFrom('autopilot_proposals').selectAll().where('account_id', '=', accountId).orderBy('seq', 'desc').limit(cap).execute();

/** Decides an open proposal; undefined when it was not open any more (decided at the same moment elsewhere). */
export async function decide(db: Kysely<DB>, id: string, set: { state: 'adopted' | 'rejected'; decided_at: Date; decided_by: string; adopted_build_id?: string }): Promise<ProposalRow | undefined> {
  return db.updateTable('autopilot_proposals').set(set).where('id', '=', id).where('state', '=', 'open').returningAll().executeTakeFirst();
}
