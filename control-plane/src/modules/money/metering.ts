import { sql, type Kysely } from 'kysely';
import { ServiceError, newId, type Clock, type SignedReceipt } from '@svc/shared';
import type { Hold, HoldRequest, Settled, Usage } from './types.ts';
import type { BillingConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { ReceiptSigner } from './signer.ts';
import { Batcher } from '../../db/batcher.ts';
import type { CreditLeases } from './leases.ts';
import { Admission } from './admit.ts';
import { PendingSettles, sweepPending } from './pending-settles.ts';
import { WriteBehind } from './write-behind.ts';
import { receiptPayload, runBatch, settleItem, settleMany, type SettleItem, type SettleResult } from './batch-calls.ts';

export type { Hold, HoldRequest, Settled, Usage } from './types.ts';

const MAX_CHAIN_RETRIES = 16;

/** A balance after a settle or credit, for observers (alerts). */
export interface BalanceObservation {
  accountId: string;
  balanceMicroUsd: number;
}

/**
 * The money path every billable route calls: hold the maximum cost (one conditional round trip that
 * never overspends, or none when admitted from a credit lease), do the work, then settle in one transaction
 * (ledger entry, usage event, signed receipt, run chain, hold release) or release on failure. Inference over
 * HTTP may be answered before that transaction commits (write-behind: its settle made durable in Postgres first). Holds expire, so a
 * process that dies mid-request leaks nothing.
 */
export class Metering {
  private readonly admission: Admission;
  private readonly settles: Batcher<SettleItem, SettleResult>;
  private readonly balanceListeners: Array<(o: BalanceObservation) => unknown> = [];
  /** This process's credit leases (Admission's; key changes and recalls reach them here). */
  readonly leases: CreditLeases;
  /** Write-behind settles (null: every settle commits before it answers). */
  private readonly behind: WriteBehind | null;
  /** Pending settles of every process (read-your-writes, the leader's sweep). */
  private readonly pending: PendingSettles;
  /** Metered units of work in flight (`meter`): above one, receipts are signed off the event loop. */
  private active = 0;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly signer: ReceiptSigner,
    private readonly cfg: BillingConfig,
    /**
     * Write-behind settles: this process's id in the database (its pending settles are written under it; see
     * PendingSettles) and the database's hot-path writes where it has them. Null: every settle commits before it answers.
     */
    behind: { processId: string; asyncCommit?: ((name: string, text: string, values: unknown[]) => Promise<void>) | undefined } | null = null,
    private readonly log: { error(o: object, msg: string): void } = { error: () => undefined },
  ) {
    this.admission = new Admission(db, clock, cfg);
    this.settles = new Batcher((items) => runBatch(items, (i) => settleMany(db, clock.now(), cfg, i)));
    this.leases = this.admission.leases;
    this.pending = new PendingSettles(db, behind?.processId ?? 'none', cfg.breakerWindowSeconds, behind?.asyncCommit);
    this.behind = behind
      ? new WriteBehind({
          store: this.pending,
          clock,
          log,
          gatherMs: cfg.settleGatherMs ?? 20,
          flushed: async (item, balance) => {
            if (item.reserved !== undefined) await this.admission.finished(item.hold, item.reserved, item.cost);
            if (balance !== null) this.observed(item.account, balance);
          },
        })
      : null;
  }

  /** Observes the balance after each settle and credit. Best-effort: a listener never delays or fails the money path. */
  onBalance(listener: (o: BalanceObservation) => unknown): void {
    this.balanceListeners.push(listener);
  }

  private observed(accountId: string, balanceMicroUsd: number): void {
    for (const l of this.balanceListeners) {
      try {
        void Promise.resolve(l({ accountId, balanceMicroUsd })).catch(() => undefined);
      } catch {
        /* best-effort */
      }
    }
  }

  /** Tells the balance observers about a balance written by a paid transfer (money/transfer.ts). */
  noteBalance(accountId: string, balanceMicroUsd: number): void {
    this.observed(accountId, balanceMicroUsd);
  }

  get billingEnforced(): boolean {
    return this.cfg.enforced;
  }

  /**
   * Resolves a key principal again, bypassing caches (KeysService.refreshPrincipal). The hold calls it when a
   * key of the chain was rotated out after the principal was resolved (outcome `key_stale`).
   */
  set refreshPrincipal(f: ((p: KeyPrincipal) => Promise<KeyPrincipal>) | null) {
    this.admission.refreshPrincipal = f;
  }

  /** Admits a request: a hold of its maximum cost (see Admission). */
  hold(req: HoldRequest): Promise<Hold> {
    return this.admission.hold(req);
  }

  /**
   * Settles a hold at the actual cost and returns the signed receipt; if settling fails the hold is released.
   * With `behind`, a hold admitted from a lease is answered as soon as its receipt is signed and its settle
   * durable in its pending row; the settle is flushed with the others gathered in the next few milliseconds (see `WriteBehind`).
   */
  async settle(hold: Hold, usage: Usage, opts: { behind?: boolean } = {}): Promise<Settled> {
    if (!Number.isSafeInteger(usage.costMicroUsd) || usage.costMicroUsd < 0) throw new Error('cost must be a non-negative integer');
    // While too many settles wait for their commit (the database slow or away), an answer waits for its own
    // commit again, so the backlog stops growing.
    if (opts.behind && hold.lease && this.behind?.open) {
      try {
        return await this.settleBehind(hold, usage);
      } catch (e) {
        this.log.error({ err: e, request_id: hold.requestId }, 'write-behind settle failed (signing or its pending row); settling before answering');
      }
    }
    try {
      return await this.settleOnce(hold, usage);
    } catch (e) {
      await this.release(hold).catch(() => undefined);
      throw e;
    }
  }

  private async settleOnce(hold: Hold, usage: Usage): Promise<Settled> {
    const now = this.clock.now();
    const usageEventId = newId('ue_', 20);
    let prev = hold.runHead;
    let count = hold.runCount;
    for (let attempt = 0; attempt < MAX_CHAIN_RETRIES; attempt++) {
      const receipt = await this.sign(receiptPayload(hold, usage, usageEventId, now, prev, count, this.signer.address));
      const item = settleItem(hold, usage, usageEventId, receipt, prev, count);
      const row = await this.settles.submit(item);
      if (row.outcome === 'settled') {
        if (hold.lease) await this.admission.finished(hold.id, hold.amount, usage.costMicroUsd);
        this.observed(hold.accountId, Number(row.balance));
        return { receipt, usageEventId, balanceMicroUsd: Number(row.balance) };
      }
      if (row.outcome === 'run_moved') {
        prev = row.run_head;
        count = row.run_count ?? 0;
        continue;
      }
      throw new Error(`settle of ${hold.id} failed: ${row.outcome} ${row.error ?? ''}`);
    }
    throw new ServiceError('conflict', `Run ${hold.runId} is being extended by too many concurrent requests; retry`);
  }

  /**
   * Write-behind settle of a lease hold: the receipt is signed and the settle made durable in its pending row
   * (a group commit shared with the settles beside it); the caller is answered then, and the settle is flushed
   * with the others gathered in the next few milliseconds. It cannot be refused: the lease already set the
   * credit aside and holds no run chain.
   */
  private async settleBehind(hold: Hold, usage: Usage): Promise<Settled> {
    const usageEventId = newId('ue_', 20);
    const signing = this.sign(receiptPayload(hold, usage, usageEventId, this.clock.now(), null, 0, this.signer.address));
    const receipt = signing instanceof Promise ? await signing : signing; // inline: no turn of its own
    // The cost stays reserved in the lease until the flush takes it out of the lease row (so the lease
    // cannot close under a settle still on its way); the rest of the reservation goes back at once.
    const cost = Math.min(usage.costMicroUsd, hold.amount);
    await this.behind!.add(settleItem(hold, usage, usageEventId, receipt, null, 0, cost)); // rejects only if the row could not be written
    void this.admission.finished(hold.id, hold.amount - cost, 0);
    return { receipt, usageEventId, balanceMicroUsd: null };
  }

  /**
   * Read-your-writes, on every replica: resolves once every settle of this account answered before the call
   * is stored (ledger, usage event, receipt). This process's own are waited for; any other process's pending
   * settles of the account are settled here (or waited for while their owner is settling them). With none
   * pending (the usual case) it costs one indexed lookup.
   */
  async settled(accountId: string): Promise<void> {
    await this.behind?.settled(accountId);
    try {
      await this.pending.settleAccount(accountId, this.clock.now());
    } catch (e) {
      this.log.error({ err: e, account_id: accountId }, 'pending settles of the account could not be settled before a read; it answers with what is stored');
    }
  }

  /** Resolves once every write-behind settle of this process was flushed (tests, shutdown). */
  settledAll(): Promise<void> {
    return this.behind?.settledAll() ?? Promise.resolve();
  }

  /**
   * The leader's sweep: settles the pending settles of processes that are gone, and any older than
   * `staleSeconds` (a process that lives but cannot flush); how many it stored.
   */
  sweepPending(alive: (ids: readonly string[]) => Promise<Set<string>>, staleSeconds = 60): Promise<number> {
    const now = this.clock.now();
    return sweepPending(this.pending, alive, now, new Date(now.getTime() - staleSeconds * 1000));
  }

  /** Releases a hold whose request failed; nothing is charged. */
  release(hold: Hold): Promise<boolean> {
    return this.admission.release(hold);
  }

  /** Expires holds past their TTL (leader loop). */
  async expireHolds(): Promise<number> {
    const r = await sql<{ n: number }>`select svc_expire_holds(${this.clock.now()}) as n`.execute(this.db);
    return Number(r.rows[0]?.n ?? 0);
  }

  /** Adds credit through the ledger; `ref` makes it idempotent per kind. */
  async credit(accountId: string, amountMicroUsd: number, kind: string, ref: string | null): Promise<{ credited: boolean; balanceMicroUsd: number }> {
    if (!Number.isSafeInteger(amountMicroUsd)) throw new Error('amount must be an integer');
    const r = await sql<{ outcome: string; balance: number }>`
      select * from svc_credit(${accountId}, ${amountMicroUsd}::bigint, ${kind}, ${ref}, ${this.clock.now()})`.execute(this.db);
    const row = r.rows[0]!;
    if (row.outcome === 'credited') this.observed(accountId, Number(row.balance));
    return { credited: row.outcome === 'credited', balanceMicroUsd: Number(row.balance) };
  }

  async position(accountId: string) {
    await this.settled(accountId);
    const row = await this.db.selectFrom('credit_accounts').select(['balance_micro_usd', 'held_micro_usd', 'leased_micro_usd']).where('account_id', '=', accountId).executeTakeFirst();
    const balance = row?.balance_micro_usd ?? 0;
    const held = row?.held_micro_usd ?? 0;
    const leased = row?.leased_micro_usd ?? 0;
    return { balance_micro_usd: balance, held_micro_usd: held, leased_micro_usd: leased, spendable_micro_usd: balance - held, billing_enforced: this.cfg.enforced };
  }

  /** Gives this process's credit leases back (shutdown). */
  async close(): Promise<void> {
    await this.behind?.close(); // write-behind settles are flushed first (or stay pending for another process)
    await this.admission.close();
  }

  /**
   * Signs a receipt: on the signer's worker thread while other metered requests are in flight (their
   * answers arrive on the same event loop), inline when this is the only one.
   */
  private sign(payload: ReturnType<typeof receiptPayload>): Promise<SignedReceipt> | SignedReceipt {
    return this.active > 1 ? this.signer.signLater(payload) : this.signer.signReceipt(payload);
  }

  /** Runs a unit of billable work between hold and settle, releasing the hold if the work throws. */
  async meter<T>(req: HoldRequest, work: (hold: Hold) => Promise<{ result: T; usage: Usage }>, opts: { behind?: boolean } = {}): Promise<{ result: T } & Settled> {
    this.active++;
    try {
      const hold = await this.hold(req);
      let out: { result: T; usage: Usage };
      try {
        out = await work(hold);
      } catch (e) {
        await this.release(hold).catch(() => undefined);
        throw e;
      }
      return { result: out.result, ...(await this.settle(hold, out.usage, opts)) };
    } finally {
      this.active--;
    }
  }
}
