import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * On-chain USDT deposits (billing module). One row per Transfer log: the unique index on
 * (chain_id, tx_hash, log_index) makes every log claimable by one account and credited once; the credit
 * itself goes through the ledger with kind 'deposit' and ref `${chain}:${tx}:${logIndex}`, idempotent too.
 * Amounts in token base units are decimal strings (uint256 does not fit a BIGINT).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table billing_deposits (
      id text primary key,
      account_id text not null references accounts(id),
      chain text not null,
      chain_id bigint not null,
      tx_hash text not null,
      log_index integer not null,
      from_address text not null,
      to_address text not null,
      token text not null,
      amount text not null,
      decimals integer not null,
      amount_micro_usd bigint not null check (amount_micro_usd >= 0),
      block_number bigint not null,
      confirmations integer not null,
      required_confirmations integer not null,
      status text not null check (status in ('pending', 'credited', 'rejected')),
      reason text,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      credited_at timestamptz
    );
    create unique index billing_deposits_log on billing_deposits (chain_id, tx_hash, log_index);
    create index billing_deposits_account on billing_deposits (account_id, created_at, id);
    create index billing_deposits_pending on billing_deposits (account_id) where status = 'pending';
  `);
}
