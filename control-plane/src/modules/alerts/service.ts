import { sql, type Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { BalanceObservation } from '../money/metering.ts';
import type { EventEmitter } from '../webhooks/service.ts';

export interface AlertsView {
  object: 'billing_alerts';
  balance_low_micro_usd: number | null;
  default_micro_usd: number;
  effective_micro_usd: number;
  armed: boolean;
  balance_micro_usd: number;
}

/**
 * The `balance_low` alert. Each account has a threshold (null: the deployment default) and an `armed`
 * flag. A balance observed after a settle or credit (Metering.onBalance) that is below the threshold while
 * armed disarms it and emits `balance_low` in the same transaction; a balance at or above the threshold
 * re-arms it. So the event fires once per crossing from >= threshold to < threshold. Setting a threshold
 * arms it according to the current balance and fires nothing (the balance did not move).
 *
 * Observations run off the money path, in order per account within this process; the common case (state
 * already consistent with the balance) costs one indexed read.
 */
export class AlertsService {
  private readonly chains = new Map<string, Promise<void>>();

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly events: EventEmitter,
    private readonly defaultMicroUsd: number,
    private readonly log: { warn(o: object, msg: string): void } = { warn: () => undefined },
  ) {}

  /** The Metering listener: queues the observation behind the account's previous one. */
  readonly observe = (o: BalanceObservation): void => {
    const prev = this.chains.get(o.accountId) ?? Promise.resolve();
    const next = prev.then(async () => void (await this.evaluate(o.accountId, o.balanceMicroUsd))).catch((err) => this.log.warn({ err, account_id: o.accountId }, 'balance alert evaluation failed'));
    this.chains.set(o.accountId, next);
    void next.finally(() => {
      if (this.chains.get(o.accountId) === next) this.chains.delete(o.accountId);
    });
  };

  /** Resolves once the observations queued so far have been evaluated (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.chains.values()]);
  }

  async evaluate(accountId: string, balance: number): Promise<'fired' | 'armed' | 'unchanged'> {
    const row = await this.db.selectFrom('balance_alerts').select(['threshold_micro_usd', 'armed']).where('account_id', '=', accountId).executeTakeFirst();
    if (row && row.armed === balance >= (row.threshold_micro_usd ?? this.defaultMicroUsd)) return 'unchanged';
    return this.db.transaction().execute(async (trx) => {
      const now = this.clock.now();
      const def = this.defaultMicroUsd;
      // First sight of the account: record its state, fire nothing (no crossing was seen). Otherwise flip
      // the flag only when it disagrees with the balance; the row lock orders concurrent observers.
      const r = await sql<{ armed: boolean; fired: boolean; threshold: number }>`
        insert into balance_alerts as a (account_id, threshold_micro_usd, armed, fired_at, updated_at)
        values (${accountId}, null, ${balance}::bigint >= ${def}::bigint, null, ${now})
        on conflict (account_id) do update
          set armed = ${balance}::bigint >= coalesce(a.threshold_micro_usd, ${def}::bigint),
              fired_at = case when a.armed then ${now} else a.fired_at end,
              updated_at = ${now}
          where a.armed <> (${balance}::bigint >= coalesce(a.threshold_micro_usd, ${def}::bigint))
        returning a.armed, (a.fired_at is not null and a.fired_at = ${now} and not a.armed) as fired,
          coalesce(a.threshold_micro_usd, ${def}::bigint) as threshold`.execute(trx);
      const out = r.rows[0];
      if (!out) return 'unchanged';
      if (!out.fired) return out.armed ? 'armed' : 'unchanged';
      await this.events.emit(accountId, 'balance_low', { balance_micro_usd: balance, threshold_micro_usd: Number(out.threshold) }, { db: trx });
      return 'fired';
    });
  }

  async get(accountId: string): Promise<AlertsView> {
    const [row, bal] = await Promise.all([
      this.db.selectFrom('balance_alerts').select(['threshold_micro_usd', 'armed']).where('account_id', '=', accountId).executeTakeFirst(),
      this.balance(accountId),
    ]);
    const effective = row?.threshold_micro_usd ?? this.defaultMicroUsd;
    return this.view(row?.threshold_micro_usd ?? null, row ? row.armed : bal >= effective, bal);
  }

  /** Sets the threshold (null: the deployment default) and arms the alert according to the current balance. */
  async set(accountId: string, threshold: number | null): Promise<AlertsView> {
    return this.db.transaction().execute(async (trx) => {
      const now = this.clock.now();
      const bal = await this.balance(accountId, trx);
      const armed = bal >= (threshold ?? this.defaultMicroUsd);
      await trx
        .insertInto('balance_alerts')
        .values({ account_id: accountId, threshold_micro_usd: threshold, armed, fired_at: null, updated_at: now })
        .onConflict((oc) => oc.column('account_id').doUpdateSet({ threshold_micro_usd: threshold, armed, updated_at: now }))
        .execute();
      return this.view(threshold, armed, bal);
    });
  }

  private async balance(accountId: string, db: Kysely<DB> = this.db): Promise<number> {
    const row = await db.selectFrom('credit_accounts').select('balance_micro_usd').where('account_id', '=', accountId).executeTakeFirst();
    return row?.balance_micro_usd ?? 0;
  }

  private view(threshold: number | null, armed: boolean, balance: number): AlertsView {
    return {
      object: 'billing_alerts',
      balance_low_micro_usd: threshold,
      default_micro_usd: this.defaultMicroUsd,
      effective_micro_usd: threshold ?? this.defaultMicroUsd,
      armed,
      balance_micro_usd: balance,
    };
  }
}
