import http from 'node:http';
import https from 'node:https';
import { outboundLookup } from '../webhooks/outbound.ts';
import { isLoopbackHost, isNonPublicAddress, pointsAtGateway, type SelfAddress } from '../webhooks/url.ts';
import { OAuthError } from './params.ts';
import { redirectUriProblem } from './redirect-uri.ts';

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, the client identification the
 * MCP authorization spec prefers): a client whose `client_id` is an https URL publishes its metadata there,
 * and the gateway fetches it at authorize time instead of asking the client to register.
 *
 * The fetch follows the webhook rules for outbound URLs (modules/webhooks): never this gateway itself, and
 * only public addresses (the name is resolved once and the connection goes to the addresses checked),
 * unless SVC_WEBHOOK_ALLOW_PRIVATE is on. With that setting on (development and tests), a loopback
 * `http:` URL is accepted too. No redirect is followed.
 */

export const METADATA_MAX_BYTES = 5 * 1024;
export const METADATA_TIMEOUT_MS = 5000;
const MAX_REDIRECT_URIS = 20;

/** A client as the authorization endpoint sees it: registered here, or described by its metadata document. */
export interface ClientInfo {
  client_id: string;
  client_name: string;
  redirect_uris: string[];
  kind: 'registered' | 'metadata_document';
  /** The scopes a registered client limited itself to, or null for any. */
  scopes: string[] | null;
}

/** A client_id that names a metadata document (a URL) rather than a client registered here. */
export function isUrlClientId(clientId: string): boolean {
  return /^https?:\/\//i.test(clientId);
}

/** What is wrong with a client_id URL, or null. */
export function clientIdUrlProblem(raw: string, allowPrivate: boolean): string | null {
  if (raw.length > 2000) return 'is longer than 2000 characters';
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return 'is not a URL';
  }
  const loopbackHttp = allowPrivate && u.protocol === 'http:' && isLoopbackHost(u.hostname);
  if (u.protocol !== 'https:' && !loopbackHttp) return 'must be an https URL';
  if (raw.includes('#')) return 'must not contain a fragment';
  if (u.username || u.password) return 'must not carry credentials';
  if (u.pathname === '/' || u.pathname === '') return 'must contain a path';
  const path = raw.slice(raw.indexOf('//') + 2).split(/[?]/)[0]!;
  if (path.split('/').some((seg) => seg === '.' || seg === '..')) return 'must not contain . or .. path segments';
  return null;
}

/** Checks a fetched document against the URL it came from and returns the client it describes. */
export function clientFromDocument(clientId: string, doc: unknown): ClientInfo {
  const bad = (why: string) => new OAuthError('invalid_client', `The client metadata document at ${clientId} ${why}`);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad('is not a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== clientId) throw bad('must contain a client_id equal to its own URL');
  if ('client_secret' in d || 'client_secret_expires_at' in d) throw bad('must not contain a client secret');
  if (d.token_endpoint_auth_method !== undefined && d.token_endpoint_auth_method !== 'none') {
    throw bad('names a token_endpoint_auth_method other than none; only public clients are served');
  }
  if (d.response_types !== undefined && !(Array.isArray(d.response_types) && d.response_types.includes('code'))) throw bad('does not allow response_type code');
  const uris = d.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS || !uris.every((x) => typeof x === 'string')) {
    throw bad(`needs redirect_uris: 1 to ${MAX_REDIRECT_URIS} strings`);
  }
  for (const uri of uris as string[]) {
    const problem = redirectUriProblem(uri);
    if (problem) throw bad(`lists the redirect URI ${uri}, which is refused: ${problem}`);
  }
  const name = typeof d.client_name === 'string' && d.client_name.trim() ? d.client_name.trim().slice(0, 200) : new URL(clientId).host;
  return { client_id: clientId, client_name: name, redirect_uris: uris as string[], kind: 'metadata_document', scopes: null };
}

/** Fetches and checks a client's metadata document; any failure is `invalid_client` naming what failed. */
export async function fetchClientMetadata(clientId: string, self: SelfAddress): Promise<ClientInfo> {
  const problem = clientIdUrlProblem(clientId, self.allowPrivate);
  if (problem) throw new OAuthError('invalid_client', `client_id ${problem}`);
  const url = new URL(clientId);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (pointsAtGateway(url, self)) throw new OAuthError('invalid_client', 'client_id must not point at this gateway');
  if (!self.allowPrivate && (isLoopbackHost(host) || isNonPublicAddress(host))) {
    throw new OAuthError('invalid_client', `client_id: ${host} is not a public address (SVC_WEBHOOK_ALLOW_PRIVATE is off)`);
  }
  let text: string;
  try {
    text = await getDocument(url, self);
  } catch (e) {
    throw new OAuthError('invalid_client', `The client metadata document at ${clientId} could not be fetched: ${(e as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new OAuthError('invalid_client', `The client metadata document at ${clientId} is not valid JSON`);
  }
  return clientFromDocument(clientId, doc);
}

/** GET of a small JSON document: 200 only (no redirects), at most METADATA_MAX_BYTES, within the timeout. */
function getDocument(url: URL, self: SelfAddress): Promise<string> {
  return new Promise((resolve, reject) => {
    const lookup = outboundLookup(url, self);
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(
      url,
      { method: 'GET', headers: { accept: 'application/json' }, lookup, signal: AbortSignal.timeout(METADATA_TIMEOUT_MS), agent: false },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`it answered HTTP ${res.statusCode ?? 0} (redirects are not followed)`));
        }
        if (!/^application\/([\w.+-]+\+)?json\b/i.test(res.headers['content-type'] ?? '')) {
          res.resume();
          return reject(new Error(`its content type is ${res.headers['content-type'] ?? 'missing'}, not application/json`));
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > METADATA_MAX_BYTES) {
            req.destroy(new Error(`it is larger than ${METADATA_MAX_BYTES} bytes`));
            return;
          }
          chunks.push(c);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end();
  });
}
