import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Payment requests (pay module): signed, non-custodial invoices settled by an on-chain transfer from the
 * payer to the payee. A transaction settles at most one request (unique (chain_id, settle_tx_hash)).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table pay_requests (
      id text primary key,
      account_id text not null references accounts(id),
      key_id text not null,
      chain text not null,
      chain_id bigint not null,
      token text not null,
      decimals integer not null,
      payee text not null,
      amount text not null,
      amount_micro_usd bigint not null check (amount_micro_usd > 0),
      memo text,
      invoice text not null,
      invoice_signature text not null,
      status text not null check (status in ('open', 'settled')),
      created_at timestamptz not null,
      expires_at timestamptz not null,
      settle_tx_hash text,
      settle_log_index integer,
      settle_from text,
      settle_amount text,
      settle_block bigint,
      settle_confirmations integer,
      settled_at timestamptz,
      settlement text,
      settlement_signature text
    );
    create unique index pay_requests_settle_tx on pay_requests (chain_id, settle_tx_hash) where settle_tx_hash is not null;
    create index pay_requests_account on pay_requests (account_id, created_at);
  `);
}
