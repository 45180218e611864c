import type { Kysely } from 'kysely';
import { PREFIX, SCOPE_NAMES, newId, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { OAuthError, splitScope } from './params.ts';
import { redirectUriProblem } from './redirect-uri.ts';

export const MAX_REDIRECT_URIS = 10;
const GRANT_TYPES = ['authorization_code', 'refresh_token'];

export interface RegisteredClient {
  client_id: string;
  client_id_issued_at: number;
  client_name?: string;
  client_uri?: string;
  redirect_uris: string[];
  grant_types: string[];
  response_types: ['code'];
  token_endpoint_auth_method: 'none';
  scope?: string;
}

const metadata = (description: string) => new OAuthError('invalid_client_metadata', description);
const redirect = (description: string) => new OAuthError('invalid_redirect_uri', description);

/**
 * The client metadata of an RFC 7591 registration, checked. Public clients only: token_endpoint_auth_method
 * omitted or `none` (no secret is issued). Redirect URIs: https, or http on a loopback host with any port.
 * Metadata this server does not use is ignored (RFC 7591 §2).
 */
export function checkRegistration(body: unknown): Omit<RegisteredClient, 'client_id' | 'client_id_issued_at'> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw metadata('The body must be a JSON object of client metadata');
  const b = body as Record<string, unknown>;
  const uris = b.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0) throw redirect('redirect_uris is required: an array of 1 to 10 URIs');
  if (uris.length > MAX_REDIRECT_URIS) throw redirect(`At most ${MAX_REDIRECT_URIS} redirect URIs`);
  for (const u of uris) {
    if (typeof u !== 'string') throw redirect('Every redirect URI must be a string');
    const problem = redirectUriProblem(u);
    if (problem) throw redirect(`${u}: ${problem}`);
  }
  if (b.token_endpoint_auth_method !== undefined && b.token_endpoint_auth_method !== 'none') {
    throw metadata(`token_endpoint_auth_method ${String(b.token_endpoint_auth_method)} is not supported: only public clients (none) are registered`);
  }
  let grants = GRANT_TYPES;
  if (b.grant_types !== undefined) {
    if (!Array.isArray(b.grant_types) || !b.grant_types.every((g) => typeof g === 'string' && GRANT_TYPES.includes(g)) || !b.grant_types.includes('authorization_code')) {
      throw metadata('grant_types must include authorization_code and may add refresh_token; no other grant is served');
    }
    grants = GRANT_TYPES.filter((g) => (b.grant_types as string[]).includes(g));
  }
  if (b.response_types !== undefined && !(Array.isArray(b.response_types) && b.response_types.length > 0 && b.response_types.every((r) => r === 'code'))) {
    throw metadata('response_types must be ["code"]');
  }
  const out: Omit<RegisteredClient, 'client_id' | 'client_id_issued_at'> = {
    redirect_uris: uris as string[],
    grant_types: grants,
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
  if (b.client_name !== undefined) {
    if (typeof b.client_name !== 'string' || !b.client_name.trim() || b.client_name.length > 200) throw metadata('client_name must be a string of 1 to 200 characters');
    out.client_name = b.client_name.trim();
  }
  if (b.client_uri !== undefined) {
    if (typeof b.client_uri !== 'string' || b.client_uri.length > 2000 || !/^https?:\/\//i.test(b.client_uri) || !URL.canParse(b.client_uri)) {
      throw metadata('client_uri must be an http(s) URL');
    }
    out.client_uri = b.client_uri;
  }
  if (b.scope !== undefined) {
    if (typeof b.scope !== 'string') throw metadata('scope must be a space-separated string');
    const scopes = splitScope(b.scope);
    const unknown = scopes.filter((s) => !(SCOPE_NAMES as string[]).includes(s));
    if (unknown.length) throw metadata(`Unknown scope(s) ${unknown.join(', ')}; supported: ${SCOPE_NAMES.join(' ')}`);
    if (scopes.length) out.scope = scopes.join(' ');
  }
  return out;
}

/** RFC 7591 §3: registers a public client; the answer is its client_id and the metadata as registered. */
export async function registerClient(db: Kysely<DB>, clock: Clock, body: unknown): Promise<RegisteredClient> {
  const c = checkRegistration(body);
  const now = clock.now();
  const id = newId(PREFIX.oauthClient);
  await db
    .insertInto('oauth_clients')
    .values({
      id,
      client_name: c.client_name ?? null,
      client_uri: c.client_uri ?? null,
      redirect_uris: JSON.stringify(c.redirect_uris),
      grant_types: JSON.stringify(c.grant_types),
      scope: c.scope ?? null,
      created_at: now,
    })
    .execute();
  return { client_id: id, client_id_issued_at: Math.floor(now.getTime() / 1000), ...c };
}
