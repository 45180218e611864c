import type { Json } from './schema-json.ts';

/**
 * The OAuth authorization server for connectors (oauth module). Every secret (authorization code, refresh
 * token, access token) is stored only as its sha256; the plaintext is shown once.
 */

/** A client registered by RFC 7591 dynamic registration: public (no secret), https or loopback redirect URIs. */
export interface OAuthClientsTable {
  id: string;
  client_name: string | null;
  client_uri: string | null;
  redirect_uris: Json<string[]>;
  grant_types: Json<string[]>;
  /** The scopes it asked for at registration (space-separated), or null. */
  scope: string | null;
  created_at: Date;
}

/**
 * An authorization request that passed validation and waits for the user's answer on the consent page.
 * The client's name is kept as seen at authorize time (a Client ID Metadata Document is fetched then).
 */
export interface OAuthRequestsTable {
  id: string;
  client_id: string;
  client_name: string;
  redirect_uri: string;
  scopes: Json<string[]>;
  state: string | null;
  code_challenge: string;
  resource: string | null;
  created_at: Date;
  expires_at: Date;
  answered_at: Date | null;
}

/**
 * One account's consent to one client: the scopes granted and the API key of the account that the client's
 * access tokens act as (spend, caps and receipts land on it). At most one live consent per account and client.
 */
export interface OAuthConsentsTable {
  id: string;
  account_id: string;
  client_id: string;
  client_name: string;
  scopes: Json<string[]>;
  key_id: string;
  created_at: Date;
  updated_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** An authorization code: single use, short-lived, bound to its client, redirect URI and PKCE challenge. */
export interface OAuthCodesTable {
  code_hash: string;
  consent_id: string;
  client_id: string;
  redirect_uri: string;
  code_challenge: string;
  scopes: Json<string[]>;
  resource: string | null;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
  /** The token family its exchange minted: revoked when the code is presented again. */
  family_id: string | null;
}

/** The refresh tokens descending from one code exchange, and the access tokens minted with them. */
export interface OAuthFamiliesTable {
  id: string;
  consent_id: string;
  client_id: string;
  scopes: Json<string[]>;
  resource: string | null;
  created_at: Date;
  revoked_at: Date | null;
  revoked_reason: string | null;
}

export interface OAuthRefreshTokensTable {
  token_hash: string;
  family_id: string;
  created_at: Date;
  expires_at: Date;
  /** When it was exchanged for its successor (rotation); a later use is a replay unless within the grace window. */
  rotated_at: Date | null;
  successor_hash: string | null;
}

export interface OAuthAccessTokensTable {
  token_hash: string;
  family_id: string;
  scopes: Json<string[]>;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}
