import type { Kysely, Selectable } from 'kysely';
import { ServiceError, newId, notFound, sha256Hex, type Clock } from '@svc/shared';
import { isUniqueViolation } from '../../db/errors.ts';
import type { DB, PayRequestsTable } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { ChainRegistry } from '../billing/chains.ts';
import { microToBase } from '../billing/units.ts';
import { transferRejected, type TransferVerifier } from '../billing/verifier.ts';
import type { ReceiptSigner } from '../money/signer.ts';

type Row = Selectable<PayRequestsTable>;

export const DEFAULT_EXPIRY_SECONDS = 24 * 3600;
/** A settling transfer may be mined at most this long before the request was created (clock skew between gateway and chain). */
export const BLOCK_TIME_SKEW_SECONDS = 120;

export interface CreateInput {
  chain: string;
  payee: string;
  amount_micro_usd: number;
  memo?: string | undefined;
  expires_in_seconds?: number | undefined;
}

export interface PendingSettlement {
  tx_hash: string;
  log_index: number;
  confirmations: number;
  required_confirmations: number;
}

/**
 * Payment requests: signed, non-custodial invoices. The gateway never holds the money: it signs what the
 * payee asks for (a USDT amount on one chain, to the payee's own address), then verifies that a transfer
 * of that token to that payee for at least the amount was mined after the request existed, and signs a
 * settlement receipt. One transaction settles at most one request.
 */
export class PayService {
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly signer: ReceiptSigner,
    private readonly chains: ChainRegistry,
    private readonly verifier: TransferVerifier,
  ) {}

  async create(p: KeyPrincipal, input: CreateInput) {
    const c = this.chains.require(input.chain);
    const now = this.clock.now();
    const expires = new Date(now.getTime() + (input.expires_in_seconds ?? DEFAULT_EXPIRY_SECONDS) * 1000);
    const id = newId('payreq_', 20);
    const amount = microToBase(input.amount_micro_usd, c.decimals);
    const invoice = this.signer.signDocument({
      v: 1,
      object: 'payment_request',
      id,
      chain: c.name,
      chain_id: c.chainId,
      token: c.usdt,
      decimals: c.decimals,
      payee: input.payee.toLowerCase(),
      amount: amount.toString(),
      amount_micro_usd: input.amount_micro_usd,
      memo: input.memo ?? null,
      created_at: now.toISOString(),
      expires_at: expires.toISOString(),
      signer: this.signer.address,
    });
    const row = await this.db
      .insertInto('pay_requests')
      .values({
        id,
        account_id: p.accountId,
        key_id: p.keyId,
        chain: c.name,
        chain_id: c.chainId,
        token: c.usdt,
        decimals: c.decimals,
        payee: input.payee.toLowerCase(),
        amount: amount.toString(),
        amount_micro_usd: input.amount_micro_usd,
        memo: input.memo ?? null,
        invoice: invoice.canonical,
        invoice_signature: invoice.signature,
        status: 'open',
        created_at: now,
        expires_at: expires,
        settle_tx_hash: null,
        settle_log_index: null,
        settle_from: null,
        settle_amount: null,
        settle_block: null,
        settle_confirmations: null,
        settled_at: null,
        settlement: null,
        settlement_signature: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.view(row);
  }

  private async own(accountId: string, id: string): Promise<Row> {
    const row = await this.db.selectFrom('pay_requests').selectAll().where('id', '=', id).where('account_id', '=', accountId).executeTakeFirst();
    if (!row) throw notFound('Payment request');
    return row;
  }

  async get(accountId: string, id: string) {
    return this.view(await this.own(accountId, id));
  }

  /** Settles with a transaction: 'settled' (signed receipt), 'pending' (too few confirmations) or an error. */
  async settle(accountId: string, id: string, txHash: string): Promise<{ outcome: 'settled' | 'existing' | 'pending'; request: PayView }> {
    const tx = txHash.toLowerCase();
    const row = await this.own(accountId, id);
    if (row.status === 'settled') {
      if (row.settle_tx_hash === tx) return { outcome: 'existing', request: this.view(row) };
      throw new ServiceError('conflict', `Payment request ${id} is already settled by transaction ${row.settle_tx_hash}`, { reason: 'already_settled' });
    }
    const now = this.clock.now();
    if (now.getTime() > row.expires_at.getTime()) {
      throw new ServiceError('conflict', `Payment request ${id} expired at ${row.expires_at.toISOString()}; create a new one`, { reason: 'expired' });
    }
    await this.assertTxUnused(row, tx);
    const c = this.chains.find(row.chain);
    if (!c || c.chainId !== row.chain_id) throw new ServiceError('unavailable', `Chain ${row.chain} is no longer configured on this gateway; the request cannot be verified`);

    const v = await this.verifier.verify({
      chain: c,
      txHash: tx,
      token: row.token,
      recipient: row.payee,
      minAmount: BigInt(row.amount),
      notBeforeSeconds: Math.floor(row.created_at.getTime() / 1000) - BLOCK_TIME_SKEW_SECONDS,
    });
    if (v.status === 'rejected') throw transferRejected(v);
    if (v.status === 'pending') {
      return { outcome: 'pending', request: this.view(row, { tx_hash: tx, log_index: v.logIndex, confirmations: v.confirmations, required_confirmations: v.required }) };
    }

    const receipt = this.signer.signDocument({
      v: 1,
      object: 'payment_settlement',
      request_id: row.id,
      invoice_sha256: sha256Hex(row.invoice),
      chain: row.chain,
      chain_id: row.chain_id,
      token: row.token,
      payee: row.payee,
      payer: v.from,
      amount_requested: row.amount,
      amount_paid: v.amount.toString(),
      tx_hash: tx,
      log_index: v.logIndex,
      block_number: Number(v.blockNumber),
      confirmations: v.confirmations,
      settled_at: now.toISOString(),
      signer: this.signer.address,
    });
    let updated: Row | undefined;
    try {
      updated = await this.db
        .updateTable('pay_requests')
        .set({
          status: 'settled',
          settle_tx_hash: tx,
          settle_log_index: v.logIndex,
          settle_from: v.from,
          settle_amount: v.amount.toString(),
          settle_block: Number(v.blockNumber),
          settle_confirmations: v.confirmations,
          settled_at: now,
          settlement: receipt.canonical,
          settlement_signature: receipt.signature,
        })
        .where('id', '=', row.id)
        .where('status', '=', 'open')
        .returningAll()
        .executeTakeFirst();
    } catch (e) {
      if (!isUniqueViolation(e)) throw e;
      throw txUsed(tx);
    }
    if (updated) return { outcome: 'settled', request: this.view(updated) };
    // A concurrent settle won: the same transaction is a repeat, another one a conflict.
    const now2 = await this.own(accountId, id);
    if (now2.settle_tx_hash === tx) return { outcome: 'existing', request: this.view(now2) };
    throw new ServiceError('conflict', `Payment request ${id} is already settled by transaction ${now2.settle_tx_hash}`, { reason: 'already_settled' });
  }

  private async assertTxUnused(row: Row, tx: string): Promise<void> {
    const used = await this.db.selectFrom('pay_requests').select('id').where('chain_id', '=', row.chain_id).where('settle_tx_hash', '=', tx).executeTakeFirst();
    if (used) throw txUsed(tx);
  }

  view(r: Row, pending: PendingSettlement | null = null) {
    const expired = r.status === 'open' && this.clock.now().getTime() > r.expires_at.getTime();
    const signed = (canonical: string, signature: string) => {
      const document = JSON.parse(canonical) as Record<string, unknown>;
      return { document, canonical, signature, signer: String(document.signer), scheme: 'eip191-personal_sign/rfc8785' };
    };
    return {
      id: r.id,
      object: 'payment_request' as const,
      status: expired ? ('expired' as const) : r.status,
      chain: r.chain,
      chain_id: r.chain_id,
      token: r.token,
      decimals: r.decimals,
      payee: r.payee,
      amount: r.amount,
      amount_micro_usd: r.amount_micro_usd,
      memo: r.memo,
      created_at: r.created_at.toISOString(),
      expires_at: r.expires_at.toISOString(),
      invoice: signed(r.invoice, r.invoice_signature),
      settlement:
        r.status === 'settled' && r.settlement && r.settlement_signature
          ? {
              tx_hash: r.settle_tx_hash!,
              log_index: r.settle_log_index!,
              payer: r.settle_from!,
              amount: r.settle_amount!,
              block_number: r.settle_block!,
              confirmations: r.settle_confirmations!,
              settled_at: r.settled_at!.toISOString(),
              receipt: signed(r.settlement, r.settlement_signature),
            }
          : null,
      pending,
    };
  }
}

export type PayView = ReturnType<PayService['view']>;

const txUsed = (tx: string) => new ServiceError('conflict', `Transaction ${tx} already settled another payment request`, { reason: 'tx_already_used' });
