import type { Generated } from 'kysely';

/**
 * Dark pool intents (darkpool module). The terms (asset, side, size, limit price, settlement address) are
 * sealed at rest; the asset and side are findable only through keyed hashes (HMAC under a key derived from the
 * seal key), so the table shows neither the book nor anyone's position.
 */
export interface DarkpoolIntentsTable {
  id: string;
  seq: Generated<number>;
  account_id: string;
  /** HMAC of asset and side: where a counterparty of the other side looks. */
  book_key: string;
  /** HMAC of the asset alone: an account's own participation in one market. */
  asset_key: string;
  state: 'resting' | 'matched' | 'withdrawn';
  terms_sealed: Uint8Array;
  match_id: string | null;
  /** Entries of the append-only history so far (the next entry's seq). */
  history_count: number;
  created_at: Date;
  matched_at: Date | null;
  withdrawn_at: Date | null;
}

/** The append-only history of an intent. */
export interface DarkpoolIntentEventsTable {
  intent_id: string;
  seq: number;
  type: string;
  at: Date;
  /** JSON of the entry's facts. */
  data: string;
}

/** A match between a buy and a sell intent; its terms, instruction and settlement receipt sealed at rest. */
export interface DarkpoolMatchesTable {
  id: string;
  buy_intent_id: string;
  sell_intent_id: string;
  buyer_account_id: string;
  seller_account_id: string;
  status: 'pending' | 'confirmed' | 'settled';
  terms_sealed: Uint8Array;
  buyer_confirmed_at: Date | null;
  seller_confirmed_at: Date | null;
  confirmed_at: Date | null;
  /** The signed settlement instruction: sealed canonical document, and its EIP-191 signature. */
  instruction_sealed: Uint8Array | null;
  instruction_signature: string | null;
  chain_id: number | null;
  settle_tx_hash: string | null;
  /** The signed settlement receipt: sealed canonical document, and its EIP-191 signature. */
  settlement_sealed: Uint8Array | null;
  settlement_signature: string | null;
  settled_at: Date | null;
  created_at: Date;
}
