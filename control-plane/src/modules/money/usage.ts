import { sql, type Kysely } from 'kysely';
import { invalid, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { Cursors } from '../../http/cursor.ts';
import type { ReceiptSigner } from './signer.ts';
import { usageView } from './usage-view.ts';
import { instantOf } from '../../http/fields.ts';

export interface EventFilters {
  kind?: string | undefined;
  key_id?: string | undefined;
  run_id?: string | undefined;
  model?: string | undefined;
  route?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

const DAY_MS = 86_400_000;

const parseTime = (v: string | undefined, field: string): Date | undefined => (v === undefined ? undefined : instantOf(v, field));

/** Usage reporting over the metering ledger: summaries, paginated events, signed statements. */
export class UsageService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly cursors: Cursors,
    private readonly signer: ReceiptSigner,
  ) {}

  async summary(accountId: string) {
    const today = Math.floor(this.clock.now().getTime() / DAY_MS) * DAY_MS;
    const from = new Date(today - 13 * DAY_MS);
    // The same 14 days by model and by key (the console's charts): every event of the window in one group each.
    const group = async <C extends 'model' | 'key_id'>(column: C) =>
      (
        await this.db
          .selectFrom('usage_events')
          .select((eb) => [column, eb.fn.countAll<number>().as('events'), eb.fn.sum<number>('cost_micro_usd').as('cost')])
          .where('account_id', '=', accountId)
          .where('created_at', '>=', from)
          .groupBy(column)
          .execute()
      )
        .map((r) => ({ [column]: (r as Record<string, unknown>)[column] as string | null, events: Number(r.events), cost_micro_usd: Number(r.cost) }) as { [K in C]: string | null } & { events: number; cost_micro_usd: number })
        .sort((x, y) => y.cost_micro_usd - x.cost_micro_usd || String(x[column]).localeCompare(String(y[column])));
    // Independent reads, sent together (a pool runs them at once).
    const [totals, latest, days, byModel, byKey] = await Promise.all([
      this.db
        .selectFrom('usage_events')
        .select((eb) => ['kind', eb.fn.countAll<number>().as('events'), eb.fn.sum<number>('cost_micro_usd').as('cost')])
        .where('account_id', '=', accountId)
        .groupBy('kind')
        .orderBy('kind')
        .execute(),
      this.db.selectFrom('usage_events').selectAll().where('account_id', '=', accountId).orderBy('n', 'desc').limit(25).execute(),
      sql<{ day: string; events: number; cost: number }>`
      select to_char(date_trunc('day', created_at at time zone 'UTC'), 'YYYY-MM-DD') as day, count(*)::int as events, sum(cost_micro_usd)::bigint as cost
      from usage_events where account_id = ${accountId} and created_at >= ${from} group by 1`.execute(this.db),
      group('model'),
      group('key_id'),
    ]);
    const byDay = new Map(days.rows.map((d) => [d.day, d]));
    const daily = Array.from({ length: 14 }, (_, i) => {
      const date = new Date(from.getTime() + i * DAY_MS).toISOString().slice(0, 10);
      const d = byDay.get(date);
      return { date, events: Number(d?.events ?? 0), cost_micro_usd: Number(d?.cost ?? 0) };
    });
    return {
      totals: {
        events: totals.reduce((a, r) => a + Number(r.events), 0),
        cost_micro_usd: totals.reduce((a, r) => a + Number(r.cost), 0),
        by_kind: totals.map((r) => ({ kind: r.kind, events: Number(r.events), cost_micro_usd: Number(r.cost) })),
      },
      events: latest.map(usageView),
      daily,
      by_model: byModel,
      by_key: byKey,
    };
  }

  /** Newest first; `cursor` resumes after the last event of the previous page. */
  async events(accountId: string, f: EventFilters, limit: number, cursor: string | undefined) {
    const since = parseTime(f.since, 'since');
    const until = parseTime(f.until, 'until');
    if (since && until && until <= since) throw invalid('until: must be after since', 'until');
    let q = this.db.selectFrom('usage_events').selectAll().where('account_id', '=', accountId);
    if (cursor !== undefined) q = q.where('n', '<', this.cursors.decode('usage_events', accountId, cursor));
    if (f.kind) q = q.where('kind', '=', f.kind);
    if (f.key_id) q = q.where('key_id', '=', f.key_id);
    if (f.run_id) q = q.where('run_id', '=', f.run_id);
    if (f.model) q = q.where('model', '=', f.model);
    if (f.route) q = q.where('route', '=', f.route);
    if (since) q = q.where('created_at', '>=', since);
    if (until) q = q.where('created_at', '<', until);
    const rows = await q.orderBy('n', 'desc').limit(limit + 1).execute();
    const page = rows.slice(0, limit);
    const more = rows.length > limit;
    return { events: page.map(usageView), next_cursor: more ? this.cursors.encode('usage_events', accountId, page[page.length - 1]!.n) : null };
  }

  /** Platform-wide aggregates for admins: paying accounts, spend by window, events by kind. */
  async platformSnapshot() {
    const now = this.clock.now().getTime();
    const windows = { '24h': DAY_MS, '7d': 7 * DAY_MS, '30d': 30 * DAY_MS };
    const spend: Record<string, { events: number; cost_micro_usd: number; accounts: number }> = {};
    for (const [name, ms] of Object.entries(windows)) {
      const r = await this.db
        .selectFrom('usage_events')
        .select((eb) => [eb.fn.countAll<number>().as('events'), eb.fn.sum<number>('cost_micro_usd').as('cost'), sql<number>`count(distinct account_id)`.as('accounts')])
        .where('created_at', '>=', new Date(now - ms))
        .executeTakeFirstOrThrow();
      spend[name] = { events: Number(r.events), cost_micro_usd: Number(r.cost ?? 0), accounts: Number(r.accounts) };
    }
    const kinds = await this.db
      .selectFrom('usage_events')
      .select((eb) => ['kind', eb.fn.countAll<number>().as('events'), eb.fn.sum<number>('cost_micro_usd').as('cost')])
      .where('created_at', '>=', new Date(now - 30 * DAY_MS))
      .groupBy('kind')
      .orderBy('kind')
      .execute();
    const paying = await this.db
      .selectFrom('ledger_entries')
      .select(sql<number>`count(distinct account_id)`.as('n'))
      .where('amount_micro_usd', '>', 0)
      .where('kind', '<>', 'grant')
      .executeTakeFirstOrThrow();
    return {
      paying_accounts: Number(paying.n),
      spend_by_window: spend,
      events_by_kind_30d: kinds.map((k) => ({ kind: k.kind, events: Number(k.events), cost_micro_usd: Number(k.cost) })),
    };
  }

  async statement(accountId: string, fromIso: string, toIso: string) {
    const from = instantOf(fromIso, 'from');
    const to = instantOf(toIso, 'to');
    if (to <= from) throw invalid('to: must be after from', 'to');
    if (to.getTime() - from.getTime() > 366 * DAY_MS) throw invalid('to: a statement covers at most 366 days', 'to');
    const usage = await this.db
      .selectFrom('usage_events')
      .select((eb) => ['kind', eb.fn.countAll<number>().as('events'), eb.fn.sum<number>('cost_micro_usd').as('cost')])
      .where('account_id', '=', accountId)
      .where('created_at', '>=', from)
      .where('created_at', '<', to)
      .groupBy('kind')
      .orderBy('kind')
      .execute();
    const balanceAt = async (at: Date) =>
      Number(
        (
          await this.db
            .selectFrom('ledger_entries')
            .select('balance_after_micro_usd')
            .where('account_id', '=', accountId)
            .where('created_at', '<', at)
            .orderBy('id', 'desc')
            .limit(1)
            .executeTakeFirst()
        )?.balance_after_micro_usd ?? 0,
      );
    const flows = await this.db
      .selectFrom('ledger_entries')
      .select((eb) => [
        eb.fn.countAll<number>().as('entries'),
        sql<number>`coalesce(sum(amount_micro_usd) filter (where amount_micro_usd > 0), 0)`.as('credits'),
        sql<number>`coalesce(-sum(amount_micro_usd) filter (where amount_micro_usd < 0), 0)`.as('debits'),
      ])
      .where('account_id', '=', accountId)
      .where('created_at', '>=', from)
      .where('created_at', '<', to)
      .executeTakeFirstOrThrow();
    const statement = {
      object: 'usage_statement',
      account_id: accountId,
      period: { from: from.toISOString(), to: to.toISOString() },
      generated_at: this.clock.now().toISOString(),
      usage: {
        events: usage.reduce((a, r) => a + Number(r.events), 0),
        cost_micro_usd: usage.reduce((a, r) => a + Number(r.cost), 0),
        by_kind: usage.map((r) => ({ kind: r.kind, events: Number(r.events), cost_micro_usd: Number(r.cost) })),
      },
      ledger: {
        opening_balance_micro_usd: await balanceAt(from),
        closing_balance_micro_usd: await balanceAt(to),
        credits_micro_usd: Number(flows.credits),
        debits_micro_usd: Number(flows.debits),
        entries: Number(flows.entries),
      },
    };
    const signed = this.signer.signDocument(statement);
    return { statement, signature: signed.signature, signer: signed.signer, scheme: signed.scheme, canonical: signed.canonical };
  }
}
