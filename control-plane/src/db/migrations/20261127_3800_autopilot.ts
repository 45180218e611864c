import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Autopilot proposals (autopilot module): one row per evaluated (target, cheaper candidate) of an analysis,
 * with all its evidence. A proposal whose evidence says regression is never adopted (a check holds it).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table autopilot_proposals (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      analysis_id text not null,
      state text not null check (state in ('open', 'adopted', 'rejected')),
      target_kind text not null check (target_kind in ('engine', 'model')),
      target text not null,
      build_id text,
      current_model text not null,
      candidate_model text not null,
      regression boolean not null,
      savings_micro_usd bigint not null,
      evidence jsonb not null,
      evidence_sha256 text not null,
      key_id text not null,
      created_at timestamptz not null,
      decided_at timestamptz,
      decided_by text,
      adopted_build_id text,
      check (not (state = 'adopted' and regression)),
      check ((state = 'adopted') = (adopted_build_id is not null))
    );
    create index autopilot_proposals_account on autopilot_proposals (account_id, seq desc);
  `);
}
