import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * The private vault (vault module). Every content column is sealed (AES-256-GCM under the seal key, each
 * value under its own nonce and bound to its row and field); ids, states, timestamps, sha256 digests and
 * the content-free hash chain are plain. `vault_assets.chain_head` and `chain_length` are the head of the
 * asset's chain: every change locks the asset row, appends one event and moves the head in one transaction.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table vault_assets (
      id text primary key,
      seq bigint generated always as identity,
      issuer_account_id text not null references accounts(id),
      state text not null check (state in ('open', 'closed')),
      name_sealed bytea not null,
      asset_class_sealed bytea not null,
      description_sealed bytea,
      identifier_sealed bytea,
      jurisdiction_sealed bytea,
      terms_sealed bytea,
      issued_sealed bytea not null,
      chain_length integer not null,
      chain_head text not null,
      created_at timestamptz not null,
      closed_at timestamptz,
      check ((state = 'closed') = (closed_at is not null))
    );
    create index vault_assets_issuer on vault_assets (issuer_account_id, seq desc);

    create table vault_chain_events (
      asset_id text not null references vault_assets(id),
      seq integer not null,
      type text not null,
      at timestamptz not null,
      payload_sha256 text not null,
      prev_hash text not null,
      hash text not null,
      payload_sealed bytea not null,
      primary key (asset_id, seq)
    );

    create table vault_positions (
      asset_id text not null references vault_assets(id),
      account_id text not null references accounts(id),
      amount_sealed bytea not null,
      updated_at timestamptz not null,
      primary key (asset_id, account_id)
    );
    create index vault_positions_account on vault_positions (account_id);

    create table vault_transfers (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      from_account_id text not null references accounts(id),
      to_wallet text not null,
      to_account_id text references accounts(id),
      claim_id text,
      amount_sealed bytea not null,
      memo_sealed bytea,
      chain_seq integer not null,
      created_at timestamptz not null
    );
    create index vault_transfers_from on vault_transfers (from_account_id, seq desc);
    create index vault_transfers_to on vault_transfers (to_account_id, seq desc);
    create index vault_transfers_asset on vault_transfers (asset_id, seq desc);

    create table vault_claims (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      transfer_id text not null references vault_transfers(id),
      sender_account_id text not null references accounts(id),
      wallet text not null,
      amount_sealed bytea not null,
      token_hash text not null unique,
      state text not null check (state in ('pending', 'settled', 'cancelled')),
      created_at timestamptz not null,
      settled_at timestamptz,
      settled_account_id text references accounts(id),
      cancelled_at timestamptz,
      check ((state = 'settled') = (settled_at is not null and settled_account_id is not null)),
      check ((state = 'cancelled') = (cancelled_at is not null))
    );
    create index vault_claims_sender on vault_claims (sender_account_id, seq desc);
    create index vault_claims_asset on vault_claims (asset_id, state);

    create table vault_distributions (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      details_sealed bytea not null,
      chain_seq integer not null,
      created_at timestamptz not null
    );
    create index vault_distributions_asset on vault_distributions (asset_id, seq desc);

    create table vault_distribution_allocations (
      distribution_id text not null references vault_distributions(id),
      account_id text not null references accounts(id),
      allocation_sealed bytea not null,
      primary key (distribution_id, account_id)
    );
    create index vault_allocations_account on vault_distribution_allocations (account_id);

    create table vault_attesters (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      role text not null check (role in ('auditor', 'custodian', 'appraiser', 'legal')),
      account_id text references accounts(id),
      wallet text,
      created_at timestamptz not null,
      revoked_at timestamptz,
      check ((account_id is null) <> (wallet is null))
    );
    create index vault_attesters_asset on vault_attesters (asset_id, seq);
    create index vault_attesters_account on vault_attesters (account_id);
    create index vault_attesters_wallet on vault_attesters (wallet);

    create table vault_attestations (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      kind text not null check (kind in ('statement', 'nav', 'reserves')),
      attester_id text references vault_attesters(id),
      recorded_by_account_id text not null references accounts(id),
      document_sealed bytea not null,
      content_sealed bytea,
      signature text not null,
      signer text not null,
      chain_seq integer not null,
      created_at timestamptz not null
    );
    create index vault_attestations_asset on vault_attestations (asset_id, seq desc);

    create table vault_documents (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      name_sealed bytea not null,
      content_type text not null,
      size_bytes integer not null,
      sha256 text not null,
      shared_with_holders boolean not null,
      content_sealed bytea,
      chain_seq integer not null,
      created_at timestamptz not null,
      deleted_at timestamptz,
      check ((deleted_at is null) = (content_sealed is not null))
    );
    create index vault_documents_asset on vault_documents (asset_id, seq desc);

    create table vault_view_grants (
      id text primary key,
      seq bigint generated always as identity,
      asset_id text not null references vault_assets(id),
      token_hash text not null unique,
      scopes text not null,
      label_sealed bytea,
      expires_at timestamptz not null,
      created_at timestamptz not null,
      revoked_at timestamptz
    );
    create index vault_view_grants_asset on vault_view_grants (asset_id, seq desc);
  `);
}
