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
 * flag. After a settle or credit (Metering.onBalance) the alert is evaluated: a balance below the threshold
 * while armed disarms it and emits `balance_low` in the same transaction; a balance at or above the
 * threshold re-arms it. So the event fires once per crossing from >= threshold to < threshold. Setting a
 * threshold arms it according to the current balance and fires nothing (the balance did not move).
 *
 * The decision is made in the database, never from the balance a caller observed: observations from
 * several processes (or one delayed behind another) arrive in any order, and a stale higher balance must
 * not re-arm an alert that a newer lower one fired (the next settle would fire it again for the same
 * crossing). An evaluation locks the account's alert row, then reads the balance as committed now (a new
 * statement, so a new snapshot under read committed) and flips `armed` with a conditional UPDATE
 * (`where armed = <old>`); concurrent evaluators queue on the row lock and each sees a balance no older
 * than the one before it, so exactly one of them fires per crossing.
 *
 * Observations run off the money path, in order per account within this process; the common case (state
 * already consistent with the balance) costs one indexed read. Cheaper still, the commonest case of all (an
 * armed alert and a balance at or above its threshold, which no evaluation would change) is answered from
 * what this process last read of the alert, for at most ARMED_CACHE_MS; a threshold changed by another
 * process within that time is seen by the first evaluation after it (so a crossing fires that late).
 */
/** How long an armed alert's threshold read by this process answers observations without a read. */
const ARMED_CACHE_MS = 1000;
/** At most this many accounts are remembered (expired ones are dropped first). */
const ARMED_CACHE_MAX = 50_000;

export class AlertsService {
  private readonly chains = new Map<string, Promise<void>>();
  /** Alerts this process last saw armed: their threshold, and until when that answers observations. */
  private readonly armed = new Map<string, { threshold: number; until: number }>();

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly events: EventEmitter,
    private readonly defaultMicroUsd: number,
    private readonly log: { warn(o: object, msg: string): void } = { warn: () => undefined },
  ) {}

  /** Accounts with an evaluation queued that has not started yet. */
  private readonly pending = new Set<string>();

  /**
   * The Metering listener: queues an evaluation behind the account's previous one. An evaluation reads the
   * balance when it starts, so observations that arrive while one is still waiting to start are covered by
   * it and queue nothing more: under load an account costs one read per evaluation, not one per settle.
   */
  readonly observe = (o: BalanceObservation): void => {
    const known = this.armed.get(o.accountId);
    if (known && o.balanceMicroUsd >= known.threshold && this.clock.now().getTime() < known.until) return; // stays armed: nothing to do
    if (this.pending.has(o.accountId)) return;
    this.pending.add(o.accountId);
    const prev = this.chains.get(o.accountId) ?? Promise.resolve();
    const next = prev
      .then(async () => {
        this.pending.delete(o.accountId);
        await this.evaluate(o.accountId, o.balanceMicroUsd);
      })
      .catch((err) => {
        this.pending.delete(o.accountId);
        this.log.warn({ err, account_id: o.accountId }, 'balance alert evaluation failed');
      });
    this.chains.set(o.accountId, next);
    void next.finally(() => {
      if (this.chains.get(o.accountId) === next) this.chains.delete(o.accountId);
    });
  };

  /** Resolves once the observations queued so far have been evaluated (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.chains.values()]);
  }

  /**
   * Evaluates the alert against the account's balance now. `observed` (the balance a settle or credit
   * reported) only says that the balance moved; it decides nothing, since it may already be stale.
   */
  async evaluate(accountId: string, observed?: number): Promise<'fired' | 'armed' | 'unchanged'> {
    const def = this.defaultMicroUsd;
    const seen = await sql<{ armed: boolean | null; threshold: string | number; balance: string | number }>`
      select a.armed, coalesce(a.threshold_micro_usd, ${def}::bigint) as threshold,
        coalesce((select c.balance_micro_usd from credit_accounts c where c.account_id = ${accountId}), 0) as balance
      from (values (1)) v left join balance_alerts a on a.account_id = ${accountId}`.execute(this.db);
    const s = seen.rows[0]!;
    if (s.armed !== null) this.remember(accountId, s.armed, Number(s.threshold));
    if (s.armed !== null && s.armed === Number(s.balance) >= Number(s.threshold)) return 'unchanged';
    return this.db.transaction().execute(async (trx) => {
      const now = this.clock.now();
      // First sight of the account: record its state, fire nothing (no crossing was seen).
      const created = await sql<{ armed: boolean }>`
        insert into balance_alerts (account_id, threshold_micro_usd, armed, fired_at, updated_at)
        select ${accountId}, null, coalesce((select c.balance_micro_usd from credit_accounts c where c.account_id = ${accountId}), 0) >= ${def}::bigint, null, ${now}
        on conflict (account_id) do nothing
        returning armed`.execute(trx);
      if (created.rows[0]) {
        this.remember(accountId, created.rows[0].armed, def);
        return created.rows[0].armed ? 'armed' : 'unchanged';
      }
      // Lock first, then read the balance in a later statement: it is at least as new as any earlier evaluator's.
      const row = await trx.selectFrom('balance_alerts').select(['armed', 'threshold_micro_usd']).where('account_id', '=', accountId).forUpdate().executeTakeFirstOrThrow();
      const threshold = Number(row.threshold_micro_usd ?? def);
      const balance = await this.balance(accountId, trx);
      const armed = balance >= threshold;
      this.remember(accountId, row.armed, threshold);
      if (armed === row.armed) return 'unchanged';
      // Only the caller that flips the flag from its old value wins (the lock makes it this one).
      const won = await trx
        .updateTable('balance_alerts')
        .set({ armed, updated_at: now, ...(armed ? {} : { fired_at: now }) })
        .where('account_id', '=', accountId)
        .where('armed', '=', !armed)
        .returning('armed')
        .executeTakeFirst();
      if (!won) return 'unchanged';
      this.remember(accountId, armed, threshold);
      if (armed) return 'armed';
      await this.events.emit(accountId, 'balance_low', { balance_micro_usd: balance, threshold_micro_usd: threshold }, { db: trx });
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
      // The same order as evaluate: hold the row lock, then read the balance.
      await trx
        .insertInto('balance_alerts')
        .values({ account_id: accountId, threshold_micro_usd: threshold, armed: false, fired_at: null, updated_at: now })
        .onConflict((oc) => oc.column('account_id').doNothing())
        .execute();
      await trx.selectFrom('balance_alerts').select('account_id').where('account_id', '=', accountId).forUpdate().execute();
      const bal = await this.balance(accountId, trx);
      const armed = bal >= (threshold ?? this.defaultMicroUsd);
      await trx.updateTable('balance_alerts').set({ threshold_micro_usd: threshold, armed, updated_at: now }).where('account_id', '=', accountId).execute();
      this.armed.delete(accountId); // the next observation reads the new threshold
      return this.view(threshold, armed, bal);
    });
  }

  /** Records what a read showed of an account's alert (only an armed one answers later observations). */
  private remember(accountId: string, armed: boolean, threshold: number): void {
    const now = this.clock.now().getTime();
    if (!armed) return void this.armed.delete(accountId);
    if (this.armed.size >= ARMED_CACHE_MAX) for (const [id, e] of this.armed) if (e.until <= now) this.armed.delete(id);
    if (this.armed.size < ARMED_CACHE_MAX) this.armed.set(accountId, { threshold, until: now + ARMED_CACHE_MS });
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
