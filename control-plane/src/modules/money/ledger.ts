import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { Cursors } from '../../http/cursor.ts';

/** The append-only credit ledger, newest first, with opaque cursors and an explicit has_more. */
export class LedgerService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly cursors: Cursors,
  ) {}

  async page(accountId: string, limit: number, cursor: string | undefined) {
    let q = this.db.selectFrom('ledger_entries').selectAll().where('account_id', '=', accountId);
    if (cursor !== undefined) q = q.where('id', '<', this.cursors.decode('ledger', accountId, cursor));
    const rows = await q.orderBy('id', 'desc').limit(limit + 1).execute();
    const page = rows.slice(0, limit);
    const hasMore = rows.length > limit;
    return {
      entries: page.map((e) => ({
        id: e.id,
        kind: e.kind,
        amount_micro_usd: e.amount_micro_usd,
        balance_after_micro_usd: e.balance_after_micro_usd,
        ref: e.ref,
        created_at: e.created_at.toISOString(),
      })),
      has_more: hasMore,
      next_cursor: hasMore ? this.cursors.encode('ledger', accountId, page[page.length - 1]!.id) : null,
    };
  }
}
