import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Dark pool (darkpool module): intents with sealed terms and blind book keys, their append-only history, and
 * matches (sealed terms, confirmations, the sealed signed instruction and settlement receipt). A transfer
 * settles one match at most: (chain_id, settle_tx_hash) is unique.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table darkpool_intents (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      book_key text not null,
      asset_key text not null,
      state text not null check (state in ('resting', 'matched', 'withdrawn')),
      terms_sealed bytea not null,
      match_id text,
      history_count integer not null,
      created_at timestamptz not null,
      matched_at timestamptz,
      withdrawn_at timestamptz,
      check ((state = 'matched') = (match_id is not null))
    );
    create index darkpool_intents_book on darkpool_intents (book_key, seq) where state = 'resting';
    create index darkpool_intents_account on darkpool_intents (account_id, asset_key);
    create table darkpool_intent_events (
      intent_id text not null references darkpool_intents(id),
      seq integer not null,
      type text not null,
      at timestamptz not null,
      data text not null,
      primary key (intent_id, seq)
    );
    create table darkpool_matches (
      id text primary key,
      buy_intent_id text not null unique references darkpool_intents(id),
      sell_intent_id text not null unique references darkpool_intents(id),
      buyer_account_id text not null references accounts(id),
      seller_account_id text not null references accounts(id),
      status text not null check (status in ('pending', 'confirmed', 'settled')),
      terms_sealed bytea not null,
      buyer_confirmed_at timestamptz,
      seller_confirmed_at timestamptz,
      confirmed_at timestamptz,
      instruction_sealed bytea,
      instruction_signature text,
      chain_id integer,
      settle_tx_hash text,
      settlement_sealed bytea,
      settlement_signature text,
      settled_at timestamptz,
      created_at timestamptz not null,
      unique (chain_id, settle_tx_hash)
    );
  `);
}
