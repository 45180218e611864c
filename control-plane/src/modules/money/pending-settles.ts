import { sql, type Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { settleJson, type SettleItem, type SettleResult } from './batch-calls.ts';

/**
 * The table of settles answered before they were written (migration 20261202_4400): the SQL of each step,
 * nothing else. A row is written (`add`) before its answer leaves, and leaves in the transaction that writes
 * its ledger entry, usage event and receipt (`settle*`), whichever process runs it.
 */

/** What one take-and-settle did: the receipt ids it took (settled now, or found stored already) and each one's balance after. */
export interface PendingTaken {
  ids: string[];
  /** Balance after each taken settle, by receipt id (absent where the receipt was stored already). */
  balances: Map<string, number>;
}

export interface PendingOwner {
  owner: string;
  oldest: Date;
}

/** The group commit's insert, prepared once on the connection of Database.asyncCommit. */
const ADD = `insert into money_pending_settles(receipt_id, account_id, owner, item, created_at)
  select i, a, $4, t, $5 from unnest($1::text[], $2::text[], $3::text[]) with ordinality as u(i, a, t, o) order by o`;

export class PendingSettles {
  constructor(
    private readonly db: Kysely<DB>,
    /** This process (its database application name: other processes see whether it is still there). */
    readonly owner: string,
    private readonly windowSeconds: number,
    /**
     * Postgres: the database's one-statement writes on a connection of their own (Database.asyncCommit).
     * Without it (embedded: the database runs in this process) a pending row's commit waits for its WAL write.
     */
    private readonly asyncCommit?: (name: string, text: string, values: unknown[]) => Promise<void>,
  ) {}

  /** Writes the pending rows of a group commit in one round trip; resolves once they committed. */
  async add(items: SettleItem[], now: Date): Promise<void> {
    if (this.asyncCommit) {
      await this.asyncCommit('svc_pending_add', ADD, [items.map((i) => i.receipt), items.map((i) => i.account), items.map(settleJson), this.owner, now]);
      return;
    }
    await sql`select svc_pending_add(${items.map((i) => i.receipt)}::text[], ${items.map((i) => i.account)}::text[], ${items.map(settleJson)}::text[], ${this.owner}, ${now}, true)`.execute(this.db);
  }

  /** Settles these pending rows of this process; rows another transaction is settling are left to it. */
  settleIds(ids: string[], now: Date): Promise<PendingTaken> {
    return this.take({ ids, account: null, owner: null, before: null, wait: false, limit: ids.length }, now);
  }

  /**
   * Settles every pending row of an account, waiting for the ones another process is settling at this moment
   * (read-your-writes): once this resolves, every settle of the account answered before it was called is stored.
   */
  async settleAccount(account: string, now: Date): Promise<number> {
    let n = 0;
    for (;;) {
      const t = await this.take({ ids: null, account, owner: null, before: null, wait: true, limit: 256 }, now);
      n += t.ids.length;
      if (t.ids.length < 256) return n;
    }
  }

  /** Settles up to `limit` pending rows of a process that is gone (or, with `before`, any row older than that). */
  settleOwner(owner: string | null, before: Date | null, limit: number, now: Date): Promise<PendingTaken> {
    return this.take({ ids: null, account: null, owner, before, wait: false, limit }, now);
  }

  /** The processes with pending rows, other than this one, with their oldest row. */
  async owners(): Promise<PendingOwner[]> {
    const r = await sql<{ owner: string; oldest: Date }>`select owner, min(created_at) as oldest from money_pending_settles where owner <> ${this.owner} group by owner`.execute(this.db);
    return r.rows.map((x) => ({ owner: x.owner, oldest: new Date(x.oldest) }));
  }

  private async take(q: { ids: string[] | null; account: string | null; owner: string | null; before: Date | null; wait: boolean; limit: number }, now: Date): Promise<PendingTaken> {
    const r = await sql<{ out: { ids: string[]; out: SettleResult[]; settled: string[] } }>`
      select svc_pending_settle(${q.ids}::text[], ${q.account}, ${q.owner}, ${q.before}, ${q.wait}, ${q.limit}, ${now}, ${this.windowSeconds}) as out`.execute(this.db);
    const out = r.rows[0]!.out;
    const balances = new Map<string, number>();
    out.settled.forEach((id, i) => {
      const b = out.out[i]?.balance;
      if (b !== null && b !== undefined) balances.set(id, Number(b));
    });
    return { ids: out.ids, balances };
  }
}

/**
 * The leader's sweep: settles the pending rows of processes that are gone (no connection to the database
 * any more: killed, lost, scaled away) and any row older than `staleBefore` whatever its owner (a process
 * that lives but cannot flush). Rows a live process is flushing at this moment are skipped. Returns how many
 * settles it stored.
 */
export async function sweepPending(store: PendingSettles, alive: (ids: readonly string[]) => Promise<Set<string>>, now: Date, staleBefore: Date): Promise<number> {
  const owners = await store.owners();
  if (owners.length === 0) return 0;
  const live = await alive(owners.map((o) => o.owner));
  let n = 0;
  const drain = async (owner: string | null, before: Date | null) => {
    for (;;) {
      const t = await store.settleOwner(owner, before, 256, now);
      n += t.balances.size;
      if (t.ids.length < 256) return;
    }
  };
  for (const o of owners) if (!live.has(o.owner)) await drain(o.owner, null);
  if (owners.some((o) => live.has(o.owner) && o.oldest < staleBefore)) await drain(null, staleBefore);
  return n;
}
