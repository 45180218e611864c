import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/** Holder support claims (support module): single-use nonces and registered claims. */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table support_nonces (
      nonce text primary key,
      solana_address text not null,
      evm_address text not null,
      message text not null,
      created_at timestamptz not null,
      expires_at timestamptz not null,
      used_at timestamptz
    );
    create index support_nonces_expiry on support_nonces (expires_at);
    create table support_claims (
      solana_address text primary key,
      evm_address text not null,
      mint text not null,
      tx_signature text not null unique,
      slot text not null,
      block_time timestamptz,
      decimals integer not null,
      pre_amount text not null,
      post_amount text not null,
      nonce text not null unique references support_nonces(nonce),
      message text not null,
      solana_signature text not null,
      evm_signature text not null,
      registration text not null,
      registration_signature text not null,
      registered_at timestamptz not null
    );
  `);
}
