import type { Kysely, Selectable } from 'kysely';
import { notFound } from '@svc/shared';
import type { DB, ReceiptsTable, RunsTable } from '../../db/schema.ts';
import { parsePayload } from './integrity.ts';

export type RunRow = Selectable<RunsTable>;
export type RunReceiptRow = Pick<Selectable<ReceiptsTable>, 'id' | 'kind' | 'payload' | 'hash' | 'signature' | 'run_seq' | 'prev_hash' | 'created_at'>;

export const RUNS_LIST_CAP = 200;

export function runSummary(r: RunRow) {
  return {
    id: r.id,
    receipt_count: r.receipt_count,
    total_cost_micro_usd: r.total_cost_micro_usd,
    head_hash: r.head_hash,
    first_at: r.first_at.toISOString(),
    last_at: r.last_at.toISOString(),
  };
}

export const spanSeconds = (r: RunRow) => (r.last_at.getTime() - r.first_at.getTime()) / 1000;

/** Run chains of one account. Another account's run id is the same 404 as an unknown one. */
export class Runs {
  constructor(private readonly db: Kysely<DB>) {}

  async list(accountId: string) {
    const rows = await this.db
      .selectFrom('runs')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('last_at', 'desc')
      .orderBy('id', 'asc')
      .limit(RUNS_LIST_CAP)
      .execute();
    return rows.map(runSummary);
  }

  /** The run row and its receipts in chain order. */
  async load(accountId: string, runId: string): Promise<{ run: RunRow; receipts: RunReceiptRow[] }> {
    const run = await this.db.selectFrom('runs').selectAll().where('account_id', '=', accountId).where('id', '=', runId).executeTakeFirst();
    if (!run) throw notFound('Run');
    const receipts = await this.db
      .selectFrom('receipts')
      .select(['id', 'kind', 'payload', 'hash', 'signature', 'run_seq', 'prev_hash', 'created_at'])
      .where('account_id', '=', accountId)
      .where('run_id', '=', runId)
      .orderBy('run_seq', 'asc')
      .orderBy('created_at', 'asc')
      .orderBy('id', 'asc')
      .execute();
    return { run, receipts };
  }

  detail(run: RunRow, receipts: RunReceiptRow[]) {
    return {
      ...runSummary(run),
      receipts: receipts.map((r) => ({
        id: r.id,
        seq: r.run_seq,
        kind: r.kind,
        hash: r.hash,
        prev_hash: r.prev_hash,
        payload: parsePayload(r.payload),
        canonical: r.payload,
        signature: r.signature,
        created_at: r.created_at.toISOString(),
      })),
    };
  }
}
