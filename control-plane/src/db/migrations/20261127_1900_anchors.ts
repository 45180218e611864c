import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * Public anchors (anchors module): queued artifact hashes (leaves), their batches (Merkle roots), and one
 * submission per root and chain, with the signed transaction kept before it is sent.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table anchor_batches (
      root text primary key,
      leaf_count integer not null,
      created_at timestamptz not null
    );
    create table anchor_leaves (
      seq bigint generated always as identity primary key,
      kind text not null,
      ref text not null,
      hash text not null,
      created_at timestamptz not null,
      batch_root text references anchor_batches(root),
      leaf_index integer,
      unique (kind, ref, hash)
    );
    create index anchor_leaves_queued on anchor_leaves (seq) where batch_root is null;
    create index anchor_leaves_batch on anchor_leaves (batch_root, leaf_index) where batch_root is not null;
    create table anchor_submissions (
      root text not null references anchor_batches(root),
      backend text not null,
      type text not null check (type in ('evm', 'solana')),
      chain_id bigint not null,
      state text not null check (state in ('pending', 'anchored', 'failed')),
      from_address text not null,
      nonce bigint,
      raw_tx text,
      tx_hash text,
      block_number bigint,
      block_hash text,
      attempts integer not null default 0,
      last_error text,
      next_attempt_at timestamptz not null,
      created_at timestamptz not null,
      anchored_at timestamptz,
      primary key (root, backend)
    );
    create index anchor_submissions_due on anchor_submissions (next_attempt_at) where state <> 'anchored';
  `);
}
