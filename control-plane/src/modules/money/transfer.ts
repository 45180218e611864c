import { sql, type Kysely } from 'kysely';
import { ServiceError, newId, type Clock, type SignedReceipt } from '@svc/shared';
import type { BillingConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import { receiptPayload, settleItem, settleMany } from './batch-calls.ts';
import type { Hold, Metering, Settled, Usage } from './metering.ts';
import type { ReceiptSigner } from './signer.ts';
import { paymentTerms } from './x402.ts';

export interface Settling {
  usageEventId: string;
  receipt: SignedReceipt;
  /** The payer's balance after the charge. */
  balanceMicroUsd: number;
}

/**
 * Money that moves from one account to another through the ledger (Agent Post's postage): the payer's
 * durable hold is settled (ledger entry, usage event, signed receipt, hold released) in one transaction
 * together with the caller's writes, typically `credit` of the payee with the usage event as reference and
 * the record paid for. Everything commits or nothing does, and the hold is released; so the payer is charged
 * exactly what the payee is credited, once. A payment must be covered: a balance that would go below zero is
 * refused as insufficient_credit even where billing is not enforced (credit cannot be created by moving it).
 */
export class Transfers {
  constructor(
    private readonly d: { db: Kysely<DB>; clock: Clock; signer: ReceiptSigner; billing: BillingConfig; metering: Metering },
  ) {}

  async settleWith<T>(
    hold: Hold,
    usage: Usage,
    resource: string,
    also: (trx: Kysely<DB>, s: Settling) => Promise<T>,
    /** Runs first in the transaction (row locks taken in a fixed order before the ledger's, so transfers between two accounts never deadlock). */
    first?: (trx: Kysely<DB>) => Promise<void>,
  ): Promise<Settled & { result: T }> {
    if (hold.lease || hold.runId !== null) throw new Error('a transfer settles a durable hold outside any run');
    const now = this.d.clock.now();
    const usageEventId = newId('ue_', 20);
    const receipt = this.d.signer.signReceipt(receiptPayload(hold, usage, usageEventId, now, null, 0, this.d.signer.address));
    try {
      const out = await this.d.db.transaction().execute(async (trx) => {
        if (first) await first(trx);
        const [row] = await settleMany(trx, now, this.d.billing, [settleItem(hold, usage, usageEventId, receipt, null, 0)]);
        if (row?.outcome !== 'settled') throw new Error(`settle of ${hold.id} failed: ${row?.outcome ?? 'no answer'} ${row?.error ?? ''}`);
        const balance = Number(row.balance);
        if (balance < 0) {
          const spendable = balance + usage.costMicroUsd;
          throw new ServiceError('insufficient_credit', `Not enough credit: this payment needs ${usage.costMicroUsd} micro-USD and ${Math.max(0, spendable)} is spendable`, {
            ...paymentTerms(this.d.billing, { shortfallMicroUsd: -balance, resource, description: `Prepaid credit for ${hold.route}` }),
            balance_micro_usd: spendable,
            required_micro_usd: usage.costMicroUsd,
          });
        }
        return { balance, result: await also(trx, { usageEventId, receipt, balanceMicroUsd: balance }) };
      });
      this.d.metering.noteBalance(hold.accountId, out.balance);
      return { receipt, usageEventId, balanceMicroUsd: out.balance, result: out.result };
    } catch (e) {
      await this.d.metering.release(hold).catch(() => undefined);
      throw e;
    }
  }

  /** Credits an account through the ledger inside the caller's transaction; `ref` makes it happen once per kind. */
  async credit(trx: Kysely<DB>, accountId: string, amountMicroUsd: number, kind: string, ref: string): Promise<{ credited: boolean; balanceMicroUsd: number }> {
    const r = await sql<{ outcome: string; balance: number }>`
      select * from svc_credit(${accountId}, ${amountMicroUsd}::bigint, ${kind}, ${ref}, ${this.d.clock.now()})`.execute(trx);
    const row = r.rows[0]!;
    return { credited: row.outcome === 'credited', balanceMicroUsd: Number(row.balance) };
  }
}
