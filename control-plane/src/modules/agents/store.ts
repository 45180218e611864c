import type { Insertable, Kysely, Selectable, Updateable } from 'kysely';
import { notFound } from '@svc/shared';
import type { AgentsTable, DB } from '../../db/schema.ts';

export type AgentRow = Selectable<AgentsTable>;

export const agentNotFound = () => notFound('Agent');

export async function insertAgent(db: Kysely<DB>, row: Insertable<AgentsTable>): Promise<AgentRow> {
  return db.insertInto('agents').values(row).returningAll().executeTakeFirstOrThrow();
}

/** One agent of the account (locked for the transaction with `lock`); unknown and another account's are the same 404. */
export async function agentOf(db: Kysely<DB>, accountId: string, id: string, lock = false): Promise<AgentRow> {
  let q = db.selectFrom('agents').selectAll().where('id', '=', id).where('account_id', '=', accountId);
  if (lock) q = q.forUpdate();
  const row = await q.executeTakeFirst();
  if (!row) throw agentNotFound();
  return row;
}

/** An agent by id alone (the public hook route, the workers), locked with `lock`; undefined when there is none. */
export async function agentById(db: Kysely<DB>, id: string, lock = false): Promise<AgentRow | undefined> {
  let q = db.selectFrom('agents').selectAll().where('id', '=', id);
  if (lock) q = q.forUpdate();
  return q.executeTakeFirst();
}

/** Every agent of the account, oldest first (at most 20 exist). */
export async function listAgents(db: Kysely<DB>, accountId: string): Promise<AgentRow[]> {
  return db.selectFrom('agents').selectAll().where('account_id', '=', accountId).orderBy('created_at').orderBy('id').execute();
}

export async function agentCount(db: Kysely<DB>, accountId: string): Promise<number> {
  const r = await db.selectFrom('agents').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function updateAgent(db: Kysely<DB>, id: string, set: Updateable<AgentsTable>): Promise<AgentRow> {
  return db.updateTable('agents').set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

/** Deletes the agent: its sealed code and key secret with the row, its runs, mailbox and seen signatures by cascade. */
export async function deleteAgent(db: Kysely<DB>, id: string): Promise<void> {
  await db.deleteFrom('agents').where('id', '=', id).execute();
}

/** Enabled agents whose schedule is due, soonest first. */
export async function dueAgents(db: Kysely<DB>, now: Date, limit: number): Promise<AgentRow[]> {
  return db.selectFrom('agents').selectAll().where('enabled', '=', true).where('next_run_at', '<=', now).orderBy('next_run_at').limit(limit).execute();
}

/**
 * Moves a due agent's next run (to `next`, counted from now), only if no other process moved it first: true
 * when this call took the due run. A run missed while no leader ran is so taken once, not once per missed tick.
 */
export async function takeDue(db: Kysely<DB>, a: AgentRow, next: Date | null, now: Date): Promise<boolean> {
  if (!a.next_run_at) return false;
  const r = await db.updateTable('agents').set({ next_run_at: next, updated_at: now }).where('id', '=', a.id).where('next_run_at', '=', a.next_run_at).executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Records a hook signature; false when it was seen already within the window (a replay). */
export async function rememberSignature(db: Kysely<DB>, agentId: string, signature: string, now: Date): Promise<boolean> {
  const r = await db.insertInto('agent_hook_signatures').values({ agent_id: agentId, signature, seen_at: now }).onConflict((oc) => oc.doNothing()).executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
}

export async function purgeSignatures(db: Kysely<DB>, before: Date): Promise<number> {
  const r = await db.deleteFrom('agent_hook_signatures').where('seen_at', '<', before).executeTakeFirst();
  return Number(r.numDeletedRows);
}
