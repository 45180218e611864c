import type { Kysely } from 'kysely';
import { PREFIX, SCOPE_NAMES, ServiceError, newId, type Clock, type Scope } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { retryOnUniqueViolation } from '../../db/errors.ts';
import { ThrottledTouch } from '../../db/throttled-touch.ts';
import type { KeyPrincipal, SessionPrincipal } from '../../http/auth-types.ts';
import type { KeysService } from '../keys/service.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { fetchClientMetadata, isUrlClientId, type ClientInfo } from './client-metadata.ts';
import { CONSENT_PAGE_PATH, type ConsentView } from './consent-page.ts';
import { acceptedResources, issuerOf } from './metadata.ts';
import { OAuthError, splitScope, type Params } from './params.ts';
import { pkceRequestProblem } from './pkce.ts';
import { redirectUriMatches } from './redirect-uri.ts';
import { clientRow, consentView, liveConsent, purgeExpired, revokeFamily, type ConsentRow } from './store.ts';
import { OAUTH_TTL, newCode, tokenHash } from './tokens.ts';

export interface OAuthDeps {
  db: Kysely<DB>;
  clock: Clock;
  keys: KeysService;
  publicUrl: URL;
  /** The webhook rules for outbound URLs, which the fetch of a client metadata document follows. */
  self: SelfAddress;
}

/** The scope granted when an authorization request names none: the remote MCP server. */
export const DEFAULT_SCOPES: Scope[] = ['mcp'];

/** What the authorization endpoint answers: the consent page, an error sent back to the client, or an error shown here. */
export type AuthorizeOutcome =
  | { kind: 'redirect'; location: string }
  | { kind: 'error_page'; status: number; error: string; description: string };

const notAnswerable = () => new ServiceError('not_found', 'Authorization request not found, expired or already answered; start again from the application');

/**
 * The OAuth authorization server's front half: clients (registered or described by a metadata document),
 * authorization requests, consent, and the resolution of access tokens for the auth hook. Owns the oauth_*
 * tables; the API key each consent acts through is minted and revoked through KeysService.
 */
export class OAuthService {
  private readonly issuer: string;
  private readonly touched: ThrottledTouch;
  constructor(private readonly d: OAuthDeps) {
    this.issuer = issuerOf(d.publicUrl);
    this.touched = new ThrottledTouch((id, now) => d.db.updateTable('oauth_consents').set({ last_used_at: now }).where('id', '=', id).execute());
  }

  /** A registered client, or the one a client_id URL's metadata document describes (fetched now). */
  async resolveClient(clientId: string): Promise<ClientInfo> {
    if (isUrlClientId(clientId)) return fetchClientMetadata(clientId, this.d.self);
    const row = clientId.startsWith(PREFIX.oauthClient) ? await clientRow(this.d.db, clientId) : undefined;
    if (!row) throw new OAuthError('invalid_client', 'Unknown client_id: register the client first (POST /v1/oauth/register) or use a client metadata document URL');
    return { client_id: row.id, client_name: row.client_name ?? row.id, redirect_uris: row.redirect_uris, kind: 'registered', scopes: row.scope ? splitScope(row.scope) : null };
  }

  /** GET /v1/oauth/client: the client's name and whether a redirect URI is one of its own. */
  async describeClient(clientId: string, redirectUri: string | undefined) {
    let c: ClientInfo;
    try {
      c = await this.resolveClient(clientId);
    } catch (e) {
      if (!(e instanceof OAuthError)) throw e;
      if (!isUrlClientId(clientId)) throw new ServiceError('not_found', 'Unknown client_id', { param: 'client_id' });
      throw new ServiceError('invalid_request', e.description, { param: 'client_id' });
    }
    return {
      client_id: c.client_id,
      client_name: c.client_name,
      metadata_document: c.kind === 'metadata_document',
      redirect_uri: redirectUri ?? null,
      redirect_uri_registered: redirectUri === undefined ? null : redirectUriMatches(c.redirect_uris, redirectUri),
    };
  }

  /**
   * Validates an authorization request. The client and the redirect URI (one registered, exactly, or on any port for loopback http)
   * are checked first: until both hold, nothing is ever sent to the redirect URI and the error is shown here.
   * After that, every error goes back to the client (RFC 6749 §4.1.2.1), and a valid request is stored and
   * the browser sent to the consent page.
   */
  async authorize(p: Params): Promise<AuthorizeOutcome> {
    const page = (error: string, description: string, status = 400): AuthorizeOutcome => ({ kind: 'error_page', status, error, description });
    if (!p.client_id) return page('invalid_request', 'client_id is required');
    let client: ClientInfo;
    try {
      client = await this.resolveClient(p.client_id);
    } catch (e) {
      if (e instanceof OAuthError) return page(e.error, e.description);
      throw e;
    }
    if (!p.redirect_uri) return page('invalid_request', 'redirect_uri is required');
    if (!redirectUriMatches(client.redirect_uris, p.redirect_uri)) {
      return page('invalid_request', 'redirect_uri is not one of the redirect URIs registered for this client (they must match exactly; a loopback http URI may differ in its port)');
    }
    const back = (error: string, description: string): AuthorizeOutcome => ({
      kind: 'redirect',
      location: this.callback(p.redirect_uri!, { error, error_description: description, state: p.state }),
    });
    if (!p.response_type) return back('invalid_request', 'response_type is required; use code');
    if (p.response_type !== 'code') return back('unsupported_response_type', 'Only response_type=code is supported');
    const pkce = pkceRequestProblem(p.code_challenge, p.code_challenge_method);
    if (pkce) return back('invalid_request', pkce);
    const requested = splitScope(p.scope);
    const unknown = requested.filter((s) => !(SCOPE_NAMES as string[]).includes(s));
    if (unknown.length) return back('invalid_scope', `Unknown scope(s) ${unknown.join(', ')}; supported: ${SCOPE_NAMES.join(' ')}`);
    const allowed = client.scopes;
    if (allowed && requested.some((s) => !allowed.includes(s))) {
      return back('invalid_scope', `This client registered for the scopes ${allowed.join(' ')} only`);
    }
    const scopes = requested.length ? requested : (allowed ?? DEFAULT_SCOPES);
    if (p.resource !== undefined && !acceptedResources(this.d.publicUrl).includes(p.resource)) {
      return back('invalid_target', `resource must be ${acceptedResources(this.d.publicUrl)[0]} (the MCP server) or this gateway's origin`);
    }
    const now = this.d.clock.now();
    const id = newId('oareq_', 32);
    await this.d.db
      .insertInto('oauth_requests')
      .values({
        id,
        client_id: client.client_id,
        client_name: client.client_name,
        redirect_uri: p.redirect_uri,
        scopes: JSON.stringify(scopes),
        state: p.state ?? null,
        code_challenge: p.code_challenge!,
        resource: p.resource ?? null,
        created_at: now,
        expires_at: new Date(now.getTime() + OAUTH_TTL.requestMs),
        answered_at: null,
      })
      .execute();
    return { kind: 'redirect', location: `${this.issuer}${CONSENT_PAGE_PATH}?request=${id}` };
  }

  /** The redirect URI with the response parameters, and `iss` (RFC 9207) so the client can tell which server answered. */
  private callback(redirectUri: string, params: Record<string, string | null | undefined>): string {
    const u = new URL(redirectUri);
    for (const [k, v] of Object.entries({ ...params, iss: this.issuer })) if (v !== undefined && v !== null) u.searchParams.set(k, v);
    return u.toString();
  }

  /** What the consent page shows for a pending request. */
  async consentView(requestId: string): Promise<ConsentView> {
    const r = await this.d.db.selectFrom('oauth_requests').selectAll().where('id', '=', requestId).executeTakeFirst();
    if (!r || r.answered_at || r.expires_at.getTime() <= this.d.clock.now().getTime()) throw notAnswerable();
    return { request_id: r.id, client_id: r.client_id, client_name: r.client_name, redirect_uri: r.redirect_uri, scopes: r.scopes, metadata_document: isUrlClientId(r.client_id) };
  }

  /**
   * The signed-in user's answer to a pending request. Approval records (or widens) the account's consent to
   * the client, minting the API key its tokens act through, and mints a single-use code; denial sends
   * `access_denied`. Either way the request is answered once, and the answer says where the browser goes.
   */
  async approve(session: SessionPrincipal, requestId: string, approve: boolean): Promise<{ redirect_to: string }> {
    const accountId = session.accountId;
    // Whether the API key of an existing consent still works is read before the transaction (which holds the
    // embedded database's one connection); a key revoked, or rotated past its grace, is replaced.
    const existing = await liveConsent(this.d.db, accountId, (await this.pendingClient(requestId)) ?? '');
    const usable = existing ? await this.keyUsable(existing.key_id) : false;
    const { redirect_to, replacedKey } = await retryOnUniqueViolation(() =>
      this.d.db.transaction().execute(async (trx) => {
        const now = this.d.clock.now();
        const r = await trx.selectFrom('oauth_requests').selectAll().where('id', '=', requestId).forUpdate().executeTakeFirst();
        if (!r || r.answered_at || r.expires_at.getTime() <= now.getTime()) throw notAnswerable();
        await trx.updateTable('oauth_requests').set({ answered_at: now }).where('id', '=', r.id).execute();
        if (!approve) {
          return { redirect_to: this.callback(r.redirect_uri, { error: 'access_denied', error_description: 'The user declined the authorization', state: r.state }), replacedKey: null };
        }
        const live = await liveConsent(trx, accountId, r.client_id, true);
        const keyOk = live ? (live.key_id === existing?.key_id ? usable : true) : false;
        const { consent, replacedKey } = await this.grant(trx, accountId, r, live, keyOk, now);
        const code = newCode();
        await trx
          .insertInto('oauth_codes')
          .values({
            code_hash: tokenHash(code),
            consent_id: consent.id,
            client_id: r.client_id,
            redirect_uri: r.redirect_uri,
            code_challenge: r.code_challenge,
            scopes: JSON.stringify(r.scopes),
            resource: r.resource,
            created_at: now,
            expires_at: new Date(now.getTime() + OAUTH_TTL.codeMs),
            used_at: null,
            family_id: null,
          })
          .execute();
        return { redirect_to: this.callback(r.redirect_uri, { code, state: r.state }), replacedKey };
      }),
    );
    if (replacedKey) await this.d.keys.revoke(accountId, replacedKey);
    return { redirect_to };
  }

  private async pendingClient(requestId: string): Promise<string | undefined> {
    const r = await this.d.db.selectFrom('oauth_requests').select('client_id').where('id', '=', requestId).executeTakeFirst();
    return r?.client_id;
  }

  /** Whether a consent's API key still authenticates (a frozen key counts: its owner can unfreeze it). */
  private async keyUsable(keyId: string): Promise<boolean> {
    try {
      await this.d.keys.principalOf(keyId);
      return true;
    } catch (e) {
      if (e instanceof ServiceError && e.type === 'invalid_credential') return false;
      if (e instanceof ServiceError && e.type === 'circuit_breaker_tripped') return true;
      throw e;
    }
  }

  /**
   * The consent a code is issued under: the live one when it already covers the scopes (and its key works),
   * else the live one widened to the union of scopes on a new key (the old key is revoked after commit), else
   * a new consent with a new key.
   */
  private async grant(trx: Kysely<DB>, accountId: string, r: { client_id: string; client_name: string; scopes: string[] }, live: ConsentRow | undefined, keyOk: boolean, now: Date) {
    if (live && keyOk && r.scopes.every((s) => live.scopes.includes(s))) return { consent: live, replacedKey: null };
    const scopes = SCOPE_NAMES.filter((s) => r.scopes.includes(s) || (live?.scopes.includes(s) ?? false));
    const key = await this.d.keys.create(accountId, { name: `OAuth: ${r.client_name}`.slice(0, 100), scopes }, trx);
    if (live) {
      await trx
        .updateTable('oauth_consents')
        .set({ scopes: JSON.stringify(scopes), key_id: key.id, client_name: r.client_name, updated_at: now })
        .where('id', '=', live.id)
        .execute();
      return { consent: { ...live, scopes, key_id: key.id }, replacedKey: live.key_id };
    }
    const consent: ConsentRow = {
      id: newId('ocon_'),
      account_id: accountId,
      client_id: r.client_id,
      client_name: r.client_name,
      scopes,
      key_id: key.id,
      created_at: now,
      updated_at: now,
      last_used_at: null,
      revoked_at: null,
    };
    await trx.insertInto('oauth_consents').values({ ...consent, scopes: JSON.stringify(scopes) }).execute();
    return { consent, replacedKey: null };
  }

  /** The account's live consents, newest first. */
  async listConsents(accountId: string) {
    const rows = await this.d.db.selectFrom('oauth_consents').selectAll().where('account_id', '=', accountId).where('revoked_at', 'is', null).orderBy('created_at', 'desc').orderBy('id').execute();
    return rows.map(consentView);
  }

  /** Withdraws a consent: every token of it stops at once, and the API key it acted through is revoked. Idempotent. */
  async revokeConsent(accountId: string, id: string) {
    const keyId = await this.d.db.transaction().execute(async (trx) => {
      const now = this.d.clock.now();
      const c = await trx.selectFrom('oauth_consents').selectAll().where('id', '=', id).where('account_id', '=', accountId).forUpdate().executeTakeFirst();
      if (!c) throw new ServiceError('not_found', 'Consent not found');
      if (!c.revoked_at) {
        await trx.updateTable('oauth_consents').set({ revoked_at: now }).where('id', '=', id).execute();
        const families = await trx.selectFrom('oauth_families').select('id').where('consent_id', '=', id).where('revoked_at', 'is', null).execute();
        for (const f of families) await revokeFamily(trx, f.id, 'consent_revoked', now);
      }
      return c.key_id;
    });
    await this.d.keys.revoke(accountId, keyId);
    return { id, revoked: true as const };
  }

  /**
   * The auth hook's resolver for an access token: the principal of the consent's API key, narrowed to the
   * token's scopes. Refused (401) when the token is unknown, expired or revoked, its family or consent
   * revoked, or the key no longer authenticates; the key's own refusals (suspended, frozen) apply as they are.
   */
  async authenticate(token: string): Promise<KeyPrincipal> {
    const row = await this.d.db
      .selectFrom('oauth_access_tokens as t')
      .innerJoin('oauth_families as f', 'f.id', 't.family_id')
      .innerJoin('oauth_consents as c', 'c.id', 'f.consent_id')
      .select(['t.scopes', 't.expires_at', 't.revoked_at as token_revoked', 'f.revoked_at as family_revoked', 'c.revoked_at as consent_revoked', 'c.key_id', 'c.id as consent_id'])
      .where('t.token_hash', '=', tokenHash(token))
      .executeTakeFirst();
    if (!row) throw new ServiceError('invalid_credential', 'Unknown OAuth access token');
    if (row.token_revoked || row.family_revoked || row.consent_revoked) throw new ServiceError('invalid_credential', 'This OAuth access token has been revoked');
    const now = this.d.clock.now();
    if (row.expires_at.getTime() <= now.getTime()) throw new ServiceError('invalid_credential', 'This OAuth access token has expired; use the refresh token');
    const p = await this.d.keys.principalOf(row.key_id);
    this.touched.touch(row.consent_id, now);
    return { ...p, scopes: p.scopes.filter((s) => row.scopes.includes(s)) };
  }

  async purgeExpired(): Promise<number> {
    return purgeExpired(this.d.db, this.d.clock.now());
  }
}
