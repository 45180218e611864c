import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Engine builds (engine module): one row per version of a slug. The sealed prompt is nulled by deletion
 * (a check keeps a deleted row without it); a partial unique index holds at most one published version
 * per (account, slug), so the switch of `engine/<slug>` from one version to another is atomic.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table engine_builds (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      slug text not null,
      version integer not null check (version >= 1),
      state text not null check (state in ('draft', 'published', 'retired')),
      model text not null,
      parameters jsonb not null,
      system_prompt_sealed bytea,
      system_prompt_sha256 text,
      policy_id text,
      policy_sha256 text,
      spec_canonical text not null,
      spec_sha256 text not null,
      origin text not null check (origin in ('api', 'autopilot')),
      proposal_id text,
      created_at timestamptz not null,
      published_at timestamptz,
      retired_at timestamptz,
      deleted_at timestamptz,
      unique (account_id, slug, version),
      check (deleted_at is null or system_prompt_sealed is null),
      check ((system_prompt_sha256 is null) <= (system_prompt_sealed is null)),
      check (not (state = 'published' and deleted_at is not null))
    );
    create unique index engine_builds_published on engine_builds (account_id, slug) where state = 'published';
    create index engine_builds_account on engine_builds (account_id, seq desc);
  `);
}
