import type { Kysely, Selectable } from 'kysely';
import { notFound } from '@svc/shared';
import type { DB, SandboxRunsTable } from '../../db/schema.ts';

type RunRow = Selectable<SandboxRunsTable>;

/** Sandbox run history: metadata only (never stdout or stderr). */
export class RunRecords {
  constructor(private readonly db: Kysely<DB>) {}

  async insert(row: RunRow): Promise<void> {
    await this.db.insertInto('sandbox_runs').values(row).execute();
  }

  view(r: RunRow) {
    return {
      id: r.id,
      object: 'sandbox.run_record' as const,
      session_id: r.session_id,
      node_id: r.node_id,
      language: r.language,
      network: r.network,
      status: r.status,
      exit_code: r.exit_code,
      timed_out: r.timed_out,
      oom_killed: r.oom_killed,
      duration_ms: r.duration_ms,
      stdout_bytes: r.stdout_bytes,
      stderr_bytes: r.stderr_bytes,
      cost_micro_usd: r.cost_micro_usd,
      image_digest: r.image_digest,
      receipt_id: r.receipt_id,
      created_at: r.created_at.toISOString(),
    };
  }

  async list(accountId: string) {
    const rows = await this.db.selectFrom('sandbox_runs').selectAll().where('account_id', '=', accountId).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(100).execute();
    return rows.map((r) => this.view(r));
  }

  async get(accountId: string, id: string) {
    const r = await this.db.selectFrom('sandbox_runs').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    if (!r) throw notFound('Sandbox run');
    return this.view(r);
  }
}
