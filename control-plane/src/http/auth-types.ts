import type { Scope } from '@svc/shared';

/**
 * Every route declares exactly one of these schemes (spec document 3), in `config.auth`; a route
 * without one fails registration. Key routes also declare the scope they need in `config.scope`.
 */
export const AUTH_SCHEMES = ['public', 'key', 'session', 'admin', 'metrics', 'node', 'path_token', 'payment'] as const;
export type AuthScheme = (typeof AUTH_SCHEMES)[number];

export interface KeyPrincipal {
  kind: 'key';
  accountId: string;
  keyId: string;
  parentId: string | null;
  /** This key then its ancestors, nearest first; spend caps apply along the whole chain. */
  chain: string[];
  scopes: Scope[];
  spendCapMicroUsd: number | null;
  expiresAt: Date | null;
  /** The live policy the key carries (policies module), resolved with the key and cached with it; absent or null: none. */
  policy?: KeyPolicy | null; // policies
  /** Allow lists along the chain (a mandate's key and keys below it); a request passes every one. Absent: none. */
  allowLists?: KeyAllowList[]; // mandates
}

/** A key's allow lists (http/key-bounds.ts): models it may name, route patterns it may call; null: any. */
export interface KeyAllowList {
  models: string[] | null;
  routes: string[] | null;
}

/** What every part of the gateway needs of a key's policy: the stamp its receipts carry (the policies module holds the rest). */
export interface KeyPolicy {
  readonly stamp: { readonly id: string; readonly sha256: string };
} // policies

export interface SessionPrincipal {
  kind: 'session';
  accountId: string;
  sessionId: string;
  walletAddress: string | null;
  /**
   * A switched session acts for an org: `accountId` is then the org's billing account, `memberAccountId`
   * the member acting, `role` that member's current role (null until the orgs module resolves it).
   */
  org?: { id: string; memberAccountId: string; role: string | null };
}

export interface NodePrincipal {
  kind: 'node';
  nodeId: string;
  accountId: string;
}

export type Principal = KeyPrincipal | SessionPrincipal | NodePrincipal | { kind: 'admin' } | { kind: 'metrics' } | { kind: 'none' };

/** Looks credentials up; each resolver throws a ServiceError (401/402/403) or returns the principal. */
export interface CredentialResolvers {
  /** At once when it can (a cached key), else a promise; a refusal is thrown or rejected. */
  apiKey(secret: string): KeyPrincipal | Promise<KeyPrincipal>;
  session(token: string, meta: { userAgent: string | undefined }): Promise<SessionPrincipal>;
  nodeKey?(secret: string): Promise<NodePrincipal>;
  /** An OAuth access token (oat-svc_...): acts as the consent's API key, narrowed to the token's scopes. */
  oauthAccessToken?(token: string): Promise<KeyPrincipal>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthScheme;
    scope?: Scope;
    /** Billable routes carry the receipt headers and may answer 402 (documented in OpenAPI). */
    billable?: boolean;
    /** The route takes a raw (non-JSON) body as a Buffer. */
    rawBody?: boolean;
    /**
     * The route reads a multipart/form-data body itself as it arrives (`request.body` is an AsyncIterable of
     * Buffers, screened like any body: hashed, denylist checked at its end, the route's bodyLimit enforced).
     */
    streamBody?: boolean;
    /** How a raw body is documented in OpenAPI (the route parses it itself, so no validator sees this schema). */
    documentedBody?: { contentType: string; schema: Record<string, unknown> };
    /** Appended to the 413 when the body exceeds the route's limit: what to send instead. */
    tooLargeHint?: string;
    /**
     * The route's group is not configured (passkeys without their settings): it answers the unknown-route
     * 404 before any credential is looked at, and stays in the OpenAPI document.
     */
    unmounted?: boolean;
  }
  interface FastifyRequest {
    principal: Principal;
    bodySha256?: string;
  }
}
