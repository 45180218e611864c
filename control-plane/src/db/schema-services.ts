import type { Generated } from 'kysely';

/**
 * A published service (services module): a hosted agent of the account or its HTTPS endpoint, sold at a slug
 * for a price paid inline by an x402 payment from buyer to the seller's payee wallet. Retiring keeps the row
 * and the slug (never reassigned) and its history.
 */
export interface ServicesTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  slug: string;
  kind: 'agent' | 'endpoint';
  agent_id: string | null;
  endpoint_url: string | null;
  price_micro_usd: number;
  /** The seller's wallet (lowercase 0x-hex), linked to the account when published. */
  payee: string;
  description: string;
  listed: boolean;
  enabled: boolean;
  status: 'active' | 'retired';
  created_at: Date;
  updated_at: Date;
  retired_at: Date | null;
}

/**
 * One paid call of a service: the payment (an EIP-3009 authorization, claimed once by token, payer and nonce),
 * its settlement transaction, and the outcome with fingerprints and a signed receipt. The answer returned is
 * sealed, kept only to answer a retry under the same payment identifier.
 */
export interface ServiceCallsTable {
  id: string;
  seq: Generated<number>;
  service_id: string;
  /** The seller's account. */
  account_id: string;
  request_id: string;
  x402_version: number;
  network: string;
  chain_id: number;
  asset: string;
  payer: string;
  payee: string;
  /** Token base units, decimal. */
  amount: string;
  amount_micro_usd: number;
  nonce: string;
  valid_before: number;
  payment_id: string | null;
  payment_sha256: string;
  request_sha256: string;
  status: 'settling' | 'delivered' | 'failed';
  tx_hash: string | null;
  block_number: number | null;
  error_type: string | null;
  error_message: string | null;
  response_status: number | null;
  response_sha256: string | null;
  response_sealed: Uint8Array | null;
  receipt_payload: string | null;
  receipt_hash: string | null;
  receipt_signature: string | null;
  created_at: Date;
  settled_at: Date | null;
  ended_at: Date | null;
}
