/**
 * Holder support claims (support module): single-use nonces naming both wallets, and registered claims (one per
 * Solana address, one per transaction). Public data: the gateway stores nothing sealed here.
 */
export interface SupportNoncesTable {
  nonce: string;
  solana_address: string;
  /** Lowercase 0x-hex. */
  evm_address: string;
  /** The exact message both wallets sign. */
  message: string;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}

export interface SupportClaimsTable {
  solana_address: string;
  evm_address: string;
  mint: string;
  tx_signature: string;
  slot: string;
  block_time: Date | null;
  decimals: number;
  /** Token base units held by the address before and after the transaction (decimal strings). */
  pre_amount: string;
  post_amount: string;
  nonce: string;
  message: string;
  solana_signature: string;
  evm_signature: string;
  /** The registration document signed by the gateway (RFC 8785 canonical) and its EIP-191 signature. */
  registration: string;
  registration_signature: string;
  registered_at: Date;
}
