import type { Kysely } from 'kysely';
import { PREFIX, newId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { isUrlClientId } from './client-metadata.ts';
import { acceptedResources } from './metadata.ts';
import { OAuthError, splitScope, type Params } from './params.ts';
import { pkceMatches } from './pkce.ts';
import { clientRow, revokeFamily, storeTokens } from './store.ts';
import { OAUTH_TTL, Successors, newAccessToken, newRefreshToken, tokenHash } from './tokens.ts';

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token?: string;
  scope: string;
}

/** A transaction's result: tokens, or a refusal raised after it commits (a replay's revocation must commit). */
type Outcome = { ok: TokenResponse } | { refused: OAuthError };
const refuse = (error: string, description: string): Outcome => ({ refused: new OAuthError(error, description) });

/**
 * The token endpoint's grants (RFC 6749 §4.1.3 and §6, OAuth 2.1) and revocation (RFC 7009).
 *
 * - `authorization_code`: single use, within 60 s, by the client it was issued to, with the redirect URI
 *   of the authorization request and the PKCE verifier of its S256 challenge. A second use is refused and
 *   revokes every token the first use minted.
 * - `refresh_token`: rotating (RFC 9700 §4.14.2); each use answers a new refresh token. A second use within
 *   OAUTH_TTL.refreshGraceMs of the first answers the same successor (racing requests rotate once); a use
 *   after that is a replay and revokes the whole family.
 *
 * Every refusal but a replay writes nothing.
 */
export class OAuthGrants {
  private readonly successors: Successors;
  constructor(
    private readonly db: Kysely<DB>,
    private readonly clock: Clock,
    private readonly publicUrl: URL,
    sealKey: Uint8Array,
  ) {
    this.successors = new Successors(sealKey);
  }

  async token(p: Params): Promise<TokenResponse> {
    const client = await this.client(p);
    switch (p.grant_type) {
      case undefined:
        throw new OAuthError('invalid_request', 'grant_type is required');
      case 'authorization_code':
        return this.settle(await this.exchangeCode(p, client.clientId, client.refreshes));
      case 'refresh_token':
        if (!client.refreshes) throw new OAuthError('unauthorized_client', 'This client did not register the refresh_token grant');
        return this.settle(await this.refresh(p, client.clientId));
      default:
        throw new OAuthError('unsupported_grant_type', `grant_type ${p.grant_type} is not supported; use authorization_code or refresh_token`);
    }
  }

  private settle(o: Outcome): TokenResponse {
    if ('refused' in o) throw o.refused;
    return o.ok;
  }

  /** Public clients identify themselves by client_id alone; this server issues no secrets. */
  private async client(p: Params): Promise<{ clientId: string; refreshes: boolean }> {
    if (p.client_secret !== undefined || p.client_assertion !== undefined) {
      throw new OAuthError('invalid_client', 'Only public clients are served (token_endpoint_auth_method none): send client_id, no secret', 401);
    }
    const clientId = p.client_id;
    if (!clientId) throw new OAuthError('invalid_request', 'client_id is required');
    if (isUrlClientId(clientId)) return { clientId, refreshes: true }; // bound to the code and the family below
    const row = clientId.startsWith(PREFIX.oauthClient) ? await clientRow(this.db, clientId) : undefined;
    if (!row) throw new OAuthError('invalid_client', 'Unknown client_id', 401);
    return { clientId, refreshes: row.grant_types.includes('refresh_token') };
  }

  private resourceProblem(resource: string | undefined, bound: string | null): OAuthError | null {
    if (resource === undefined) return null;
    if (!acceptedResources(this.publicUrl).includes(resource) || (bound !== null && resource !== bound)) {
      return new OAuthError('invalid_target', bound ? `resource must be ${bound}, the one the authorization was for` : 'resource is not served by this gateway');
    }
    return null;
  }

  private async exchangeCode(p: Params, clientId: string, refreshes: boolean): Promise<Outcome> {
    if (!p.code) throw new OAuthError('invalid_request', 'code is required');
    if (!p.redirect_uri) throw new OAuthError('invalid_request', 'redirect_uri is required');
    if (!p.code_verifier) throw new OAuthError('invalid_request', 'code_verifier is required (PKCE)');
    return this.db.transaction().execute(async (trx): Promise<Outcome> => {
      const now = this.clock.now();
      const code = await trx.selectFrom('oauth_codes').selectAll().where('code_hash', '=', tokenHash(p.code!)).forUpdate().executeTakeFirst();
      if (!code) return refuse('invalid_grant', 'Unknown authorization code');
      if (code.used_at) {
        if (code.family_id) await revokeFamily(trx, code.family_id, 'code_replayed', now);
        return refuse('invalid_grant', 'This authorization code was already used; the tokens issued for it are revoked');
      }
      if (code.expires_at.getTime() <= now.getTime()) return refuse('invalid_grant', 'This authorization code has expired');
      if (code.client_id !== clientId) return refuse('invalid_grant', 'This authorization code was issued to another client');
      if (code.redirect_uri !== p.redirect_uri) return refuse('invalid_grant', 'redirect_uri differs from the one of the authorization request');
      if (!pkceMatches(p.code_verifier!, code.code_challenge)) return refuse('invalid_grant', 'code_verifier does not match the code_challenge of the authorization request');
      const target = this.resourceProblem(p.resource, code.resource);
      if (target) return { refused: target };
      const consent = await trx.selectFrom('oauth_consents').select('revoked_at').where('id', '=', code.consent_id).executeTakeFirstOrThrow();
      if (consent.revoked_at) return refuse('invalid_grant', 'The consent this code was issued under has been withdrawn');

      const familyId = newId('ofam_');
      await trx
        .insertInto('oauth_families')
        .values({ id: familyId, consent_id: code.consent_id, client_id: clientId, scopes: JSON.stringify(code.scopes), resource: code.resource, created_at: now, revoked_at: null, revoked_reason: null })
        .execute();
      await trx.updateTable('oauth_codes').set({ used_at: now, family_id: familyId }).where('code_hash', '=', code.code_hash).execute();
      const access = newAccessToken();
      const refresh = refreshes ? newRefreshToken() : null;
      await storeTokens(trx, familyId, { access, refresh, scopes: code.scopes }, now);
      return { ok: { access_token: access, token_type: 'Bearer', expires_in: OAUTH_TTL.accessMs / 1000, ...(refresh ? { refresh_token: refresh } : {}), scope: code.scopes.join(' ') } };
    });
  }

  private async refresh(p: Params, clientId: string): Promise<Outcome> {
    const presented = p.refresh_token;
    if (!presented) throw new OAuthError('invalid_request', 'refresh_token is required');
    const narrowed = p.scope === undefined ? undefined : splitScope(p.scope);
    return this.db.transaction().execute(async (trx): Promise<Outcome> => {
      const now = this.clock.now();
      // Locked: racing uses of one token take turns, and the second sees the first's rotation.
      const rt = await trx
        .selectFrom('oauth_refresh_tokens as r')
        .innerJoin('oauth_families as f', 'f.id', 'r.family_id')
        .innerJoin('oauth_consents as c', 'c.id', 'f.consent_id')
        .select(['r.token_hash', 'r.family_id', 'r.expires_at', 'r.rotated_at', 'f.client_id', 'f.scopes', 'f.resource', 'f.revoked_at as family_revoked', 'c.revoked_at as consent_revoked'])
        .where('r.token_hash', '=', tokenHash(presented))
        .forUpdate()
        .executeTakeFirst();
      if (!rt) return refuse('invalid_grant', 'Unknown refresh token');
      if (rt.client_id !== clientId) return refuse('invalid_grant', 'This refresh token was issued to another client');
      if (rt.family_revoked || rt.consent_revoked) return refuse('invalid_grant', 'This refresh token has been revoked');
      if (rt.expires_at.getTime() <= now.getTime()) return refuse('invalid_grant', 'This refresh token has expired; authorize again');
      if (narrowed && narrowed.some((s) => !rt.scopes.includes(s))) return refuse('invalid_scope', `scope may only narrow the granted scopes (${rt.scopes.join(' ')})`);
      const target = this.resourceProblem(p.resource, rt.resource);
      if (target) return { refused: target };
      const next = this.successors.of(presented);

      if (rt.rotated_at === null) {
        const scopes = narrowed && narrowed.length ? narrowed : rt.scopes;
        await trx.updateTable('oauth_refresh_tokens').set({ rotated_at: now, successor_hash: tokenHash(next.refresh) }).where('token_hash', '=', rt.token_hash).execute();
        await storeTokens(trx, rt.family_id, { access: next.access, refresh: next.refresh, scopes }, now);
        return { ok: { access_token: next.access, token_type: 'Bearer', expires_in: OAUTH_TTL.accessMs / 1000, refresh_token: next.refresh, scope: scopes.join(' ') } };
      }
      if (now.getTime() - rt.rotated_at.getTime() <= OAUTH_TTL.refreshGraceMs) {
        // A racing second use: the successor the first use got, derived again (only its hash is stored).
        const access = await trx.selectFrom('oauth_access_tokens').select(['scopes', 'expires_at']).where('token_hash', '=', tokenHash(next.access)).executeTakeFirstOrThrow();
        const expiresIn = Math.max(0, Math.floor((access.expires_at.getTime() - now.getTime()) / 1000));
        return { ok: { access_token: next.access, token_type: 'Bearer', expires_in: expiresIn, refresh_token: next.refresh, scope: access.scopes.join(' ') } };
      }
      await revokeFamily(trx, rt.family_id, 'refresh_token_reused', now);
      return refuse('invalid_grant', 'This refresh token was already used; every token of its family is revoked, authorize again');
    });
  }

  /**
   * RFC 7009 revocation; answered 200 whatever the token (unknown, expired, another client's). A refresh
   * token revokes its whole family, access tokens included; an access token revokes itself.
   */
  async revoke(p: Params): Promise<void> {
    if (!p.token) throw new OAuthError('invalid_request', 'token is required');
    const hash = tokenHash(p.token);
    const now = this.clock.now();
    const mine = (clientIdOfToken: string) => p.client_id === undefined || p.client_id === clientIdOfToken;
    await this.db.transaction().execute(async (trx) => {
      const refresh = await trx
        .selectFrom('oauth_refresh_tokens as r')
        .innerJoin('oauth_families as f', 'f.id', 'r.family_id')
        .select(['r.family_id', 'f.client_id'])
        .where('r.token_hash', '=', hash)
        .executeTakeFirst();
      if (refresh) {
        if (mine(refresh.client_id)) await revokeFamily(trx, refresh.family_id, 'revoked', now);
        return;
      }
      const access = await trx
        .selectFrom('oauth_access_tokens as t')
        .innerJoin('oauth_families as f', 'f.id', 't.family_id')
        .select(['t.token_hash', 'f.client_id'])
        .where('t.token_hash', '=', hash)
        .executeTakeFirst();
      if (access && mine(access.client_id)) {
        await trx.updateTable('oauth_access_tokens').set({ revoked_at: now }).where('token_hash', '=', hash).where('revoked_at', 'is', null).execute();
      }
    });
  }
}
