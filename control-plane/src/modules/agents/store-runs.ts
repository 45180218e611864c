import { sql, type Insertable, type Kysely, type Selectable, type Updateable } from 'kysely';
import { notFound } from '@svc/shared';
import type { AgentRunsTable, DB } from '../../db/schema.ts';

export type RunRow = Selectable<AgentRunsTable>;

/** What `GET /v1/agents/:id/runs` returns at most: the newest. */
export const RUNS_LIST_CAP = 100;

export async function insertRun(db: Kysely<DB>, row: Insertable<AgentRunsTable>): Promise<RunRow> {
  const run = await db.insertInto('agent_runs').values(row).returningAll().executeTakeFirstOrThrow();
  await db
    .updateTable('agents')
    .set((eb) => ({ run_count: eb('run_count', '+', 1), last_run_id: run.id, last_run_at: run.created_at, last_run_status: run.status }))
    .where('id', '=', run.agent_id)
    .execute();
  return run;
}

/** Sets a run's outcome; the agent's last-run status follows when it is the agent's latest run. */
export async function finishRun(db: Kysely<DB>, id: string, set: Updateable<AgentRunsTable>): Promise<RunRow | undefined> {
  const run = await db.updateTable('agent_runs').set(set).where('id', '=', id).returningAll().executeTakeFirst();
  if (run) await db.updateTable('agents').set({ last_run_status: run.status }).where('id', '=', run.agent_id).where('last_run_id', '=', run.id).execute();
  return run;
}

export async function listRuns(db: Kysely<DB>, agentId: string): Promise<RunRow[]> {
  return db.selectFrom('agent_runs').selectAll().where('agent_id', '=', agentId).orderBy('seq', 'desc').limit(RUNS_LIST_CAP).execute();
}

export async function runOf(db: Kysely<DB>, agentId: string, runId: string): Promise<RunRow> {
  const r = await db.selectFrom('agent_runs').selectAll().where('agent_id', '=', agentId).where('id', '=', runId).executeTakeFirst();
  if (!r) throw notFound('Agent run');
  return r;
}

/** Runs of the agent created since `since` (every trigger and outcome), and when the oldest of them was created. */
export async function runsSince(db: Kysely<DB>, agentId: string, since: Date): Promise<{ n: number; oldest: Date | null }> {
  const r = await db
    .selectFrom('agent_runs')
    .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.min('created_at').as('oldest')])
    .where('agent_id', '=', agentId)
    .where('created_at', '>', since)
    .executeTakeFirstOrThrow();
  return { n: Number(r.n), oldest: r.oldest ? new Date(r.oldest as unknown as string) : null };
}

/** Runs of the agent admitted but not yet ended (queued or running): each may still take a hold. */
export async function pendingRuns(db: Kysely<DB>, agentId: string): Promise<number> {
  const r = await db
    .selectFrom('agent_runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('agent_id', '=', agentId)
    .where('status', 'in', ['queued', 'running'])
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

export interface ClaimedRun {
  id: string;
  agent_id: string;
  trigger: RunRow['trigger'];
  request_id: string;
  input_sealed: Uint8Array | null;
}

/**
 * Claims up to `limit` queued runs, oldest first, for this process: each becomes `running` with a claim that
 * holds until `until`, and its sealed input leaves the row in the same statement (the caller holds it now).
 * Rows another process is claiming at the same moment are skipped (for update skip locked), so each queued
 * run is claimed once.
 */
export async function claimQueued(db: Kysely<DB>, processId: string, now: Date, until: Date, limit: number): Promise<ClaimedRun[]> {
  const r = await sql<ClaimedRun>`
    with c as (
      select id, input_sealed from agent_runs where status = 'queued' order by seq limit ${limit} for update skip locked
    )
    update agent_runs r set status = 'running', input_sealed = null, claimed_by = ${processId}, claim_until = ${until}, started_at = ${now}
    from c where r.id = c.id
    returning r.id, r.agent_id, r.trigger, r.request_id, c.input_sealed`.execute(db);
  return r.rows;
}

/**
 * Runs whose claim ran out while still `running` (their process died mid-run): they end `failed` as
 * interrupted, never run again (their sandbox run may have been charged already). Returns how many.
 */
export async function failInterrupted(db: Kysely<DB>, now: Date): Promise<number> {
  const r = await db
    .updateTable('agent_runs')
    .set({ status: 'failed', error_type: 'interrupted', error_message: 'The process running it stopped before the run ended', ended_at: now, input_sealed: null })
    .where('status', '=', 'running')
    .where('claim_until', '<', now)
    .returning(['id', 'agent_id'])
    .execute();
  for (const x of r) await db.updateTable('agents').set({ last_run_status: 'failed' }).where('id', '=', x.agent_id).where('last_run_id', '=', x.id).execute();
  return r.length;
}

/** Every receipted agent run (the explorer's total). */
export async function receiptedRunCount(db: Kysely<DB>): Promise<number> {
  const r = await db.selectFrom('agent_runs').select((eb) => eb.fn.countAll<number>().as('n')).where('receipt_id', 'is not', null).executeTakeFirstOrThrow();
  return Number(r.n);
}
