import { sql, type Kysely, type Selectable } from 'kysely';
import { ServiceError, invalid, type Clock } from '@svc/shared';
import type { BillingConfig, PlanConfig } from '../../config.ts';
import type { DB, SubscriptionsTable } from '../../db/schema.ts';
import type { BalanceObservation, Metering } from '../money/metering.ts';
import { paymentTerms } from '../money/x402.ts';
import type { EventEmitter } from '../webhooks/service.ts';
import { FREE_PLAN, addMonth, feeRef, planView, type PlanView } from './plans.ts';

type Row = Selectable<SubscriptionsTable>;
export const LEDGER_KIND = 'subscription';
const RENEW_BATCH = 100;

export interface SubscriptionView {
  object: 'subscription';
  plan: PlanView;
  period_start: string | null;
  period_end: string | null;
  auto_renew: boolean;
  scheduled_plan: string | null;
  fee_micro_usd: number;
  balance_micro_usd: number;
  held_micro_usd: number;
  spendable_micro_usd: number;
}

export type Change = 'started' | 'upgraded' | 'scheduled' | 'resumed' | 'unchanged';

export interface SubscriptionDeps {
  db: Kysely<DB>;
  clock: Clock;
  metering: Pick<Metering, 'position' | 'leases'>;
  events: EventEmitter;
  plans: PlanConfig[];
  billing: BillingConfig;
  publicUrl: URL;
  /** Told the new balance after a fee is debited (balance alerts). */
  observeBalance?: (o: BalanceObservation) => void;
}

/**
 * Plans and subscriptions. An account without a row is on Free. A paid plan's monthly fee is debited from
 * prepaid credit through the ledger (kind `subscription`, ref `subscription:<account>:<plan>:<period_start>`)
 * by `svc_debit`, which refuses when the spendable credit cannot cover it (402 with x402 terms; nothing is
 * written). Buying a plan is a purchase, not metering: the fee must be covered even where metered calls
 * are not enforced (SVC_BILLING_ENFORCED=false), so the balance never goes negative for a plan.
 *
 * Switching rules (POST /v1/billing/subscription):
 * - to the current plan: turns auto-renew back on and drops a scheduled change; nothing is charged;
 * - from Free to a paid plan: the full fee now; a new period starts now;
 * - to a plan with a higher fee: immediate; the new plan's full fee now; a new period starts now; the
 *   unused part of the old period is not refunded or prorated;
 * - to a plan with an equal or lower fee: scheduled for the period end (no charge now); Free is the same
 *   as cancelling.
 * Renewal (leader loop) at period end charges the next plan (the scheduled one, or the current one while
 * auto-renew is on) for one calendar month starting at the old period end (or now, if that month is
 * already over); a fee that cannot be covered drops the account to Free and emits
 * `subscription_renewal_failed`; a cancelled one drops to Free with `subscription_ended`. Each period
 * renews once: the row is updated only while its period_end is the one read, under a row lock, and the
 * ledger's unique ref refuses a second debit.
 */
export class SubscriptionService {
  private readonly byId: Map<string, PlanConfig>;

  constructor(private readonly d: SubscriptionDeps) {
    this.byId = new Map(d.plans.map((p) => [p.id, p]));
    if (!this.byId.has(FREE_PLAN)) throw new Error('the plan catalog needs a free plan');
  }

  plans(): PlanView[] {
    return this.d.plans.map(planView);
  }

  private plan(id: string): PlanConfig {
    return this.byId.get(id) ?? { id, name: `${id} (retired)`, monthlyFeeMicroUsd: 0, retentionDays: this.byId.get(FREE_PLAN)!.retentionDays, limits: {}, features: {} };
  }

  async get(accountId: string): Promise<SubscriptionView> {
    const row = await this.d.db.selectFrom('subscriptions').selectAll().where('account_id', '=', accountId).executeTakeFirst();
    return this.view(row, accountId);
  }

  async subscribe(accountId: string, planId: string): Promise<SubscriptionView & { change: Change; charged_micro_usd: number }> {
    const target = this.byId.get(planId);
    if (!target) throw invalid(`plan: unknown plan "${planId}"; see GET /v1/billing/plans (${[...this.byId.keys()].join(', ')})`, 'plan');
    let balance: number | undefined;
    await this.d.metering.leases.returnAccount(accountId); // credit this process leased for requests is free for the fee again
    const out = await this.d.db.transaction().execute(async (trx) => {
      const now = this.d.clock.now();
      const cur = await this.lock(trx, accountId, now);
      const paid = cur.period_end !== null;
      const curFee = this.byId.get(cur.plan_id)?.monthlyFeeMicroUsd ?? Number(cur.fee_micro_usd);
      const set = (s: Partial<Row>) => trx.updateTable('subscriptions').set({ ...s, updated_at: now }).where('account_id', '=', accountId).execute();

      if (target.id === cur.plan_id) {
        if (!paid || (cur.auto_renew && cur.scheduled_plan_id === null)) return { change: 'unchanged' as Change, charged: 0 };
        await set({ auto_renew: true, scheduled_plan_id: null });
        return { change: 'resumed' as Change, charged: 0 };
      }
      if (paid && target.monthlyFeeMicroUsd <= curFee) {
        if (target.id === FREE_PLAN) await set({ auto_renew: false, scheduled_plan_id: null });
        else await set({ auto_renew: true, scheduled_plan_id: target.id });
        return { change: 'scheduled' as Change, charged: 0 };
      }
      // Starts now: from Free, or up to a plan with a higher fee.
      const debit = await this.debit(trx, accountId, target, now, now);
      if (debit.outcome === 'insufficient_credit') throw this.paymentRequired(target, debit.balance, debit.held);
      if (debit.outcome === 'leased') throw new ServiceError('conflict', 'Part of this credit is leased to another gateway process for requests in flight and is being given back; retry in a moment');
      balance = debit.balance;
      await set({ plan_id: target.id, period_start: now, period_end: addMonth(now), auto_renew: true, scheduled_plan_id: null, fee_micro_usd: target.monthlyFeeMicroUsd });
      return { change: (paid ? 'upgraded' : 'started') as Change, charged: debit.outcome === 'debited' ? target.monthlyFeeMicroUsd : 0 };
    });
    if (balance !== undefined && out.charged > 0) this.d.observeBalance?.({ accountId, balanceMicroUsd: balance });
    return { ...(await this.get(accountId)), change: out.change, charged_micro_usd: out.charged };
  }

  /** Turns auto-renew off: the plan runs to its period end, then the account drops to Free. Idempotent. */
  async cancel(accountId: string): Promise<SubscriptionView> {
    await this.d.db
      .updateTable('subscriptions')
      .set({ auto_renew: false, scheduled_plan_id: null, updated_at: this.d.clock.now() })
      .where('account_id', '=', accountId)
      .where('period_end', 'is not', null)
      .execute();
    return this.get(accountId);
  }

  /** Leader loop: renews (or ends) every subscription whose period is over. Returns how many it moved. */
  async renewDue(): Promise<number> {
    const due = await this.d.db
      .selectFrom('subscriptions')
      .select(['account_id', 'period_end'])
      .where('period_end', '<=', this.d.clock.now())
      .orderBy('period_end')
      .limit(RENEW_BATCH)
      .execute();
    let n = 0;
    for (const s of due) if (await this.renewOne(s.account_id, s.period_end!)) n++;
    return n;
  }

  private async renewOne(accountId: string, periodEnd: Date): Promise<boolean> {
    let observed: BalanceObservation | undefined;
    await this.d.metering.leases.returnAccount(accountId);
    const moved = await this.d.db.transaction().execute(async (trx) => {
      // Locked and still ending where we read it: otherwise another process renewed it already.
      const cur = await trx.selectFrom('subscriptions').selectAll().where('account_id', '=', accountId).where('period_end', '=', periodEnd).forUpdate().executeTakeFirst();
      if (!cur) return false;
      const now = this.d.clock.now();
      const nextId = !cur.auto_renew ? FREE_PLAN : (cur.scheduled_plan_id ?? cur.plan_id);
      const next = this.byId.get(nextId);
      const toFree = (extra: Partial<Row> = {}) =>
        trx
          .updateTable('subscriptions')
          .set({ plan_id: FREE_PLAN, period_start: periodEnd, period_end: null, auto_renew: false, scheduled_plan_id: null, fee_micro_usd: 0, updated_at: now, ...extra })
          .where('account_id', '=', accountId)
          .execute();
      if (!next || next.id === FREE_PLAN) {
        await toFree();
        await this.d.events.emit(accountId, 'subscription_ended', { plan: cur.plan_id, period_end: periodEnd.toISOString(), reason: next ? 'cancelled' : 'plan_retired' }, { db: trx });
        return true;
      }
      let start = periodEnd;
      let end = addMonth(start);
      if (end <= now) {
        start = now;
        end = addMonth(now);
      }
      const debit = await this.debit(trx, accountId, next, start, now);
      // Covered only once other processes give leased credit back (they were notified): the next run renews.
      if (debit.outcome === 'leased') return false;
      if (debit.outcome === 'insufficient_credit') {
        await toFree();
        await this.d.events.emit(
          accountId,
          'subscription_renewal_failed',
          { plan: next.id, fee_micro_usd: next.monthlyFeeMicroUsd, balance_micro_usd: debit.balance, spendable_micro_usd: debit.balance - debit.held, period_end: periodEnd.toISOString() },
          { db: trx },
        );
        return true;
      }
      await trx
        .updateTable('subscriptions')
        .set({ plan_id: next.id, period_start: start, period_end: end, scheduled_plan_id: null, fee_micro_usd: next.monthlyFeeMicroUsd, updated_at: now })
        .where('account_id', '=', accountId)
        .execute();
      await this.d.events.emit(
        accountId,
        'subscription_renewed',
        { plan: next.id, fee_micro_usd: next.monthlyFeeMicroUsd, period_start: start.toISOString(), period_end: end.toISOString(), balance_micro_usd: debit.balance },
        { db: trx },
      );
      if (debit.outcome === 'debited') observed = { accountId, balanceMicroUsd: debit.balance };
      return true;
    });
    if (observed) this.d.observeBalance?.(observed);
    return moved;
  }

  /** Makes sure the account has a row (Free) and locks it. */
  private async lock(trx: Kysely<DB>, accountId: string, now: Date): Promise<Row> {
    await trx
      .insertInto('subscriptions')
      .values({ account_id: accountId, plan_id: FREE_PLAN, period_start: now, period_end: null, auto_renew: false, scheduled_plan_id: null, created_at: now, updated_at: now })
      .onConflict((oc) => oc.column('account_id').doNothing())
      .execute();
    return trx.selectFrom('subscriptions').selectAll().where('account_id', '=', accountId).forUpdate().executeTakeFirstOrThrow();
  }

  /** Debits a plan fee; always refused when the spendable credit cannot cover it (whatever SVC_BILLING_ENFORCED says). */
  private async debit(trx: Kysely<DB>, accountId: string, plan: PlanConfig, periodStart: Date, now: Date) {
    const r = await sql<{ outcome: 'debited' | 'duplicate' | 'insufficient_credit' | 'leased'; balance: number; held: number }>`
      select * from svc_debit(${accountId}, ${plan.monthlyFeeMicroUsd}::bigint, ${LEDGER_KIND}, ${feeRef(accountId, plan.id, periodStart)}, ${now}, true)`.execute(trx);
    const row = r.rows[0]!;
    return { outcome: row.outcome, balance: Number(row.balance), held: Number(row.held) };
  }

  private paymentRequired(plan: PlanConfig, balance: number, held: number): ServiceError {
    const spendable = balance - held;
    const terms = paymentTerms(this.d.billing, {
      shortfallMicroUsd: plan.monthlyFeeMicroUsd - spendable,
      resource: new URL('/v1/billing/subscription', this.d.publicUrl).toString(),
      description: `Monthly fee of the ${plan.name} plan`,
    });
    return new ServiceError(
      'insufficient_credit',
      `Not enough credit for plan ${plan.id}: its monthly fee is ${plan.monthlyFeeMicroUsd} micro-USD and ${Math.max(0, spendable)} is spendable`,
      { ...terms, plan: plan.id, balance_micro_usd: balance, held_micro_usd: held, required_micro_usd: plan.monthlyFeeMicroUsd },
    );
  }

  private async view(row: Row | undefined, accountId: string): Promise<SubscriptionView> {
    const pos = await this.d.metering.position(accountId);
    return {
      object: 'subscription',
      plan: planView(this.plan(row?.plan_id ?? FREE_PLAN)),
      period_start: row?.period_start.toISOString() ?? null,
      period_end: row?.period_end?.toISOString() ?? null,
      auto_renew: row?.auto_renew ?? false,
      scheduled_plan: row?.scheduled_plan_id ?? null,
      fee_micro_usd: Number(row?.fee_micro_usd ?? 0),
      balance_micro_usd: pos.balance_micro_usd,
      held_micro_usd: pos.held_micro_usd,
      spendable_micro_usd: pos.spendable_micro_usd,
    };
  }
}
