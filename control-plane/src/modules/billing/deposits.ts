import { sql, type Kysely, type Selectable } from 'kysely';
import { ServiceError, newId, type Clock } from '@svc/shared';
import type { ChainConfig } from '../../config.ts';
import { isUniqueViolation } from '../../db/errors.ts';
import type { BillingDepositsTable, DB } from '../../db/schema.ts';
import type { Metering } from '../money/metering.ts';
import type { ChainRegistry } from './chains.ts';
import { baseToMicro, microToBase } from './units.ts';
import { transferRejected, type TransferVerifier, type Verification } from './verifier.ts';

type Row = Selectable<BillingDepositsTable>;
type Checked = Extract<Verification, { status: 'verified' | 'pending' }>;

export const LIST_CAP = 100;
/** Pending deposits read per page by a refresh (which walks all of them). */
export const REFRESH_PAGE = 100;
const LEDGER_KIND = 'deposit';

/** Who may claim a transfer: only a wallet linked to the account (default), or any sender. */
export type DepositSenders = 'linked' | 'any';

export interface DepositInput {
  chain: string;
  tx_hash: string;
  log_index?: number | undefined;
}

export interface DepositsOptions {
  treasury: string | undefined;
  senders: DepositSenders;
  /** The account's linked wallets (identity module), lowercase or not. */
  linkedWallets(accountId: string): Promise<string[]>;
}

export type SubmitOutcome = 'credited' | 'existing' | 'pending';

export const ledgerRef = (chain: string, txHash: string, logIndex: number) => `${chain}:${txHash}:${logIndex}`;

/**
 * Prepaid credit from on-chain USDT sent to the treasury. A submitted transaction is verified on its chain;
 * its Transfer log is claimed by one account (unique (chain_id, tx_hash, log_index)) and credited once
 * through the ledger (kind 'deposit', ref `${chain}:${tx}:${logIndex}`). Too few confirmations record the
 * claim as `pending` with nothing credited; a refresh credits it once confirmed. Rejections write nothing.
 */
export class DepositService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly metering: Metering,
    private readonly chains: ChainRegistry,
    private readonly verifier: TransferVerifier,
    private readonly opts: DepositsOptions,
  ) {}

  private treasury(): string {
    if (!this.opts.treasury) throw new ServiceError('unavailable', 'Deposits are not configured on this gateway (no treasury address)');
    return this.opts.treasury.toLowerCase();
  }

  async submit(accountId: string, input: DepositInput): Promise<{ deposit: DepositView; outcome: SubmitOutcome }> {
    const c = this.chains.require(input.chain);
    const treasury = this.treasury();
    const tx = input.tx_hash.toLowerCase();

    // Idempotent repeat: this account already claimed this transaction (or the pinned log of it).
    let mine = this.db.selectFrom('billing_deposits').selectAll().where('account_id', '=', accountId).where('chain_id', '=', c.chainId).where('tx_hash', '=', tx);
    if (input.log_index !== undefined) mine = mine.where('log_index', '=', input.log_index);
    const own = await mine.orderBy('log_index').executeTakeFirst();
    if (own) return own.status === 'pending' ? this.recheck(own, c, true) : { deposit: view(own), outcome: 'existing' };

    const v = await this.verifier.verify({
      chain: c,
      txHash: tx,
      token: c.usdt,
      recipient: treasury,
      minAmount: microToBase(c.minDepositMicroUsd, c.decimals),
      logIndex: input.log_index,
    });
    if (v.status === 'rejected') throw transferRejected(v);

    const claimed = await this.byLog(c.chainId, tx, v.logIndex);
    if (claimed) return this.ownClaim(claimed, accountId, c);

    if (this.opts.senders === 'linked') {
      const wallets = (await this.opts.linkedWallets(accountId)).map((w) => w.toLowerCase());
      if (!wallets.includes(v.from)) {
        throw transferRejected({
          reason: 'sender_not_linked',
          message: `The transfer was sent from ${v.from}, which is not a wallet linked to this account; link it (POST /v1/auth/wallets) and submit again`,
          detail: { from: v.from },
        });
      }
    }
    const micro = baseToMicro(v.amount, c.decimals);
    if (micro > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw transferRejected({ reason: 'amount_too_large', message: `${v.amount} base units exceed what one deposit can credit`, detail: { amount: v.amount.toString() } });
    }

    const now = this.clock.now();
    let row: Row;
    try {
      row = await this.db
        .insertInto('billing_deposits')
        .values({
          id: newId('dep_', 20),
          account_id: accountId,
          chain: c.name,
          chain_id: c.chainId,
          tx_hash: tx,
          log_index: v.logIndex,
          from_address: v.from,
          to_address: v.to,
          token: v.token,
          amount: v.amount.toString(),
          decimals: c.decimals,
          amount_micro_usd: Number(micro),
          block_number: Number(v.blockNumber),
          confirmations: v.confirmations,
          required_confirmations: v.required,
          status: 'pending',
          reason: null,
          created_at: now,
          updated_at: now,
          credited_at: null,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    } catch (e) {
      if (!isUniqueViolation(e)) throw e;
      // Lost a race for this log: the winner's row decides (ours again, or 409).
      const winner = await this.byLog(c.chainId, tx, v.logIndex);
      if (!winner) throw e;
      return this.ownClaim(winner, accountId, c);
    }
    if (v.status === 'pending') return { deposit: view(row), outcome: 'pending' };
    return { deposit: view(await this.credit(row, v)), outcome: 'credited' };
  }

  private byLog(chainId: number, tx: string, logIndex: number) {
    return this.db.selectFrom('billing_deposits').selectAll().where('chain_id', '=', chainId).where('tx_hash', '=', tx).where('log_index', '=', logIndex).executeTakeFirst();
  }

  private async ownClaim(row: Row, accountId: string, c: ChainConfig): Promise<{ deposit: DepositView; outcome: SubmitOutcome }> {
    if (row.account_id !== accountId) {
      throw new ServiceError('conflict', `Log ${row.log_index} of transaction ${row.tx_hash} on chain ${row.chain} was already submitted by another account`, {
        reason: 'claimed_by_another_account',
      });
    }
    return row.status === 'pending' ? this.recheck(row, c, true) : { deposit: view(row), outcome: 'existing' };
  }

  /** Credits a confirmed claim exactly once (the ledger ref is idempotent) and marks it credited. */
  private async credit(row: Row, v: Checked): Promise<Row> {
    try {
      await this.metering.credit(row.account_id, row.amount_micro_usd, LEDGER_KIND, ledgerRef(row.chain, row.tx_hash, row.log_index));
    } catch (e) {
      // Two concurrent credits of one ref: the loser hits the ledger's unique index; the winner credited it.
      if (!isUniqueViolation(e)) throw e;
    }
    const now = this.clock.now();
    const updated = await this.db
      .updateTable('billing_deposits')
      .set({ status: 'credited', confirmations: v.confirmations, credited_at: now, updated_at: now, reason: null })
      .where('id', '=', row.id)
      .where('status', '=', 'pending')
      .returningAll()
      .executeTakeFirst();
    return updated ?? (await this.db.selectFrom('billing_deposits').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow());
  }

  /**
   * Re-checks a pending claim: credits it once confirmed, updates its confirmations otherwise. A
   * transaction that vanished (a reorg, or a lagging node) stays pending; one that now fails a check is
   * marked rejected with the reason. `strict` (a submit) lets RPC failures surface as 502.
   */
  private async recheck(row: Row, c: ChainConfig | undefined, strict: boolean): Promise<{ deposit: DepositView; outcome: SubmitOutcome }> {
    const chain = c ?? this.chains.find(row.chain);
    if (!chain || chain.chainId !== row.chain_id || !this.opts.treasury) return { deposit: view(row), outcome: 'pending' };
    let v: Verification;
    try {
      v = await this.verifier.verify({
        chain,
        txHash: row.tx_hash,
        token: row.token,
        recipient: row.to_address,
        // The claim was accepted at submission; a later change of the minimum does not undo it.
        minAmount: BigInt(row.amount),
        logIndex: row.log_index,
      });
    } catch (e) {
      if (strict) throw e;
      return { deposit: view(row), outcome: 'pending' };
    }
    const now = this.clock.now();
    if (v.status === 'verified') {
      if (v.from !== row.from_address || v.amount.toString() !== row.amount) return { deposit: view(await this.markRejected(row, 'transfer_changed')), outcome: 'existing' };
      return { deposit: view(await this.credit(row, v)), outcome: 'credited' };
    }
    if (v.status === 'pending' || v.reason === 'not_found') {
      const confirmations = v.status === 'pending' ? v.confirmations : 0;
      const updated = await this.db
        .updateTable('billing_deposits')
        .set({ confirmations, updated_at: now })
        .where('id', '=', row.id)
        .where('status', '=', 'pending')
        .returningAll()
        .executeTakeFirst();
      return { deposit: view(updated ?? row), outcome: 'pending' };
    }
    return { deposit: view(await this.markRejected(row, v.reason)), outcome: 'existing' };
  }

  private async markRejected(row: Row, reason: string): Promise<Row> {
    const now = this.clock.now();
    const updated = await this.db
      .updateTable('billing_deposits')
      .set({ status: 'rejected', reason, updated_at: now })
      .where('id', '=', row.id)
      .where('status', '=', 'pending')
      .returningAll()
      .executeTakeFirst();
    return updated ?? row;
  }

  async list(accountId: string): Promise<DepositView[]> {
    const rows = await this.db
      .selectFrom('billing_deposits')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(LIST_CAP)
      .execute();
    return rows.map(view);
  }

  /**
   * Re-checks every pending deposit of the account, oldest first, in pages of REFRESH_PAGE (keyset on
   * (created_at, id), so a row that stays pending is not read twice and none is skipped); returns the list.
   */
  async refresh(accountId: string): Promise<DepositView[]> {
    let after: string | undefined;
    for (;;) {
      let q = this.db.selectFrom('billing_deposits').selectAll().where('account_id', '=', accountId).where('status', '=', 'pending');
      // The cursor row's key is read in the database, so timestamps never round-trip through JS milliseconds.
      if (after) q = q.where(sql<boolean>`(created_at, id) > (select c.created_at, c.id from billing_deposits c where c.id = ${after})`);
      const page = await q.orderBy('created_at').orderBy('id').limit(REFRESH_PAGE).execute();
      for (const row of page) await this.recheck(row, undefined, false);
      if (page.length < REFRESH_PAGE) break;
      after = page[page.length - 1]!.id;
    }
    return this.list(accountId);
  }
}

export type DepositView = ReturnType<typeof view>;

function view(r: Row) {
  return {
    id: r.id,
    object: 'deposit' as const,
    status: r.status,
    chain: r.chain,
    chain_id: r.chain_id,
    tx_hash: r.tx_hash,
    log_index: r.log_index,
    from: r.from_address,
    to: r.to_address,
    token: r.token,
    amount: r.amount,
    decimals: r.decimals,
    amount_micro_usd: r.amount_micro_usd,
    block_number: r.block_number,
    confirmations: r.confirmations,
    required_confirmations: r.required_confirmations,
    reason: r.reason,
    ledger_ref: ledgerRef(r.chain, r.tx_hash, r.log_index),
    created_at: r.created_at.toISOString(),
    credited_at: r.credited_at ? r.credited_at.toISOString() : null,
  };
}
