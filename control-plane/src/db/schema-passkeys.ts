import type { Json } from './schema-json.ts';

/** A registered passkey (passkeys module): a WebAuthn credential that signs in to one account. */
export interface PasskeysTable {
  id: string;
  account_id: string;
  /** The credential id, base64url, as the authenticator names it; unique across accounts. */
  credential_id: string;
  /** COSE public key; never leaves the gateway. */
  public_key: Uint8Array;
  /** The authenticator's signature counter at its last use; 0 for authenticators that keep none (synced passkeys). */
  counter: number;
  transports: Json<string[]>;
  device_type: 'singleDevice' | 'multiDevice';
  backed_up: boolean;
  /** Authenticator model (AAGUID), all zeros where the authenticator does not say. */
  aaguid: string;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

/**
 * An issued WebAuthn challenge: only its sha256 is kept. Bound to its ceremony (and, for registration, to
 * the account it was issued to); used once.
 */
export interface PasskeyChallengesTable {
  challenge_hash: string;
  ceremony: 'register' | 'login';
  account_id: string | null;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
}
