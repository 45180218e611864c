import type { Kysely } from 'kysely';
import { runStatements } from '../statements.ts';

/**
 * The marketplace (services module): published services, reserved for good at their slug (a retired service
 * keeps its row and its slug), and their paid calls. A call is claimed before its payment settles: one row
 * per EIP-3009 authorization (token, payer, nonce), so a payment is spent once even under concurrency, and
 * at most one per (service, payment identifier). Rows keep payment metadata and fingerprints; the answer
 * returned to the buyer is sealed (for a retry under the same payment identifier), never listed.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await runStatements(db, `
    create table services (
      id text primary key,
      seq bigint generated always as identity,
      account_id text not null references accounts(id),
      slug text not null unique,
      kind text not null check (kind in ('agent', 'endpoint')),
      agent_id text,
      endpoint_url text,
      price_micro_usd bigint not null check (price_micro_usd > 0),
      payee text not null,
      description text not null,
      listed boolean not null,
      enabled boolean not null,
      status text not null check (status in ('active', 'retired')),
      created_at timestamptz not null,
      updated_at timestamptz not null,
      retired_at timestamptz,
      check ((kind = 'agent') = (agent_id is not null)),
      check ((kind = 'endpoint') = (endpoint_url is not null)),
      check ((status = 'retired') = (retired_at is not null))
    );
    create index services_account on services (account_id, seq);
    create table service_calls (
      id text primary key,
      seq bigint generated always as identity,
      service_id text not null references services(id),
      account_id text not null references accounts(id),
      request_id text not null,
      x402_version integer not null,
      network text not null,
      chain_id bigint not null,
      asset text not null,
      payer text not null,
      payee text not null,
      amount text not null,
      amount_micro_usd bigint not null,
      nonce text not null,
      valid_before bigint not null,
      payment_id text,
      payment_sha256 text not null,
      request_sha256 text not null,
      status text not null check (status in ('settling', 'delivered', 'failed')),
      tx_hash text,
      block_number bigint,
      error_type text,
      error_message text,
      response_status integer,
      response_sha256 text,
      response_sealed bytea,
      receipt_payload text,
      receipt_hash text,
      receipt_signature text,
      created_at timestamptz not null,
      settled_at timestamptz,
      ended_at timestamptz,
      check ((status = 'settling') or (tx_hash is not null))
    );
    create unique index service_calls_authorization on service_calls (chain_id, asset, payer, nonce);
    create unique index service_calls_payment_id on service_calls (service_id, payment_id) where payment_id is not null;
    create index service_calls_service on service_calls (service_id, seq desc);
  `);
}
