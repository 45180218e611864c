import type { FastifyInstance, FastifyRequest } from 'fastify';
import { PREFIX, ServiceError, sha256Hex, digestEquals } from '@svc/shared';
import { AUTH_SCHEMES, type CredentialResolvers, type KeyPrincipal, type SessionPrincipal } from './auth-types.ts';
import { routeNotFound } from './errors.ts';
import { assertSameOrigin } from './csrf.ts';
import { assertModelAllowed, assertRouteAllowed, modelsOf } from './key-bounds.ts'; // mandates

export const SESSION_COOKIE = 'svc_session';

export interface AuthOptions {
  resolvers: CredentialResolvers;
  adminToken: string | undefined;
  metricsToken: string | undefined;
  /** This gateway's origin (`SVC_PUBLIC_URL`): where unsafe requests authenticated by the session cookie must come from. */
  publicOrigin: string;
  /**
   * Awaited before every non-billable request of an account (key or session): its write-behind settles
   * committed first, so right after an answer the caller reads its latest charges (balance, usage,
   * receipts, key spend) and can act on them (share a receipt). Billable requests never wait for it.
   */
  readBarrier?: (accountId: string) => Promise<void>;
  /** Refuses (throws) a route that a session acting for an org may not call under its role; the org role table. */
  orgRouteGate?: (role: string | null, method: string, url: string | undefined) => void;
}

function bearer(req: FastifyRequest): string | undefined {
  const h = req.headers.authorization;
  if (!h) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  if (!m) throw new ServiceError('invalid_credential', 'Authorization header must be "Bearer <credential>"');
  return m[1];
}

export function readCookie(req: FastifyRequest, name: string): string | undefined {
  const raw = req.headers.cookie;
  if (!raw) return undefined;
  for (const part of raw.split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return undefined;
}

function kindOf(credential: string): string {
  if (credential.startsWith(PREFIX.apiKeySecret)) return 'an API key (sk-svc_...)';
  if (credential.startsWith(PREFIX.session)) return 'a session token (sess_...)';
  if (credential.startsWith(PREFIX.nodeKey)) return 'a node key (nk-svc_...)';
  if (credential.startsWith(PREFIX.oauthAccessToken)) return 'an OAuth access token (oat-svc_...)';
  return 'an unrecognised credential';
}

/** Constant-time check of a configured bearer token; the hash equalises lengths. */
function tokenMatches(given: string | undefined, expected: string): boolean {
  return given !== undefined && digestEquals(sha256Hex(given), sha256Hex(expected));
}

/**
 * A browser cannot set headers on a WebSocket, only its subprotocols: a WebSocket upgrade may carry its API key
 * as the subprotocol `svc.key.<sk-svc_...>` beside the protocol it speaks (the console's terminal). Explicit, so
 * no ambient credential; the server never selects it back (see WS_KEY_PROTOCOL_PREFIX).
 */
export const WS_KEY_PROTOCOL_PREFIX = 'svc.key.';
function webSocketKey(req: FastifyRequest): string | undefined {
  if (String(req.headers.upgrade ?? '').toLowerCase() !== 'websocket') return undefined;
  const offered = String(req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim());
  const p = offered.find((x) => x.startsWith(WS_KEY_PROTOCOL_PREFIX));
  return p ? p.slice(WS_KEY_PROTOCOL_PREFIX.length) : undefined;
}

/** The key principal of the request's API key: at once when the resolver has it, else a promise; refusals are thrown. */
export function resolveKey(req: FastifyRequest, r: CredentialResolvers): KeyPrincipal | Promise<KeyPrincipal> {
  // The Anthropic SDK sends its key in x-api-key by default; it is the same API key.
  const apiKeyHeader = req.headers['x-api-key'];
  const cred = bearer(req) ?? (typeof apiKeyHeader === 'string' ? apiKeyHeader.trim() : undefined) ?? webSocketKey(req);
  if (!cred) throw new ServiceError('authentication_required', 'This route needs an API key: Authorization: Bearer sk-svc_...');
  // An OAuth access token stands for the API key its consent acts through, with the token's scopes.
  if (r.oauthAccessToken && cred.startsWith(PREFIX.oauthAccessToken)) return r.oauthAccessToken(cred);
  if (!cred.startsWith(PREFIX.apiKeySecret)) {
    throw new ServiceError('wrong_credential_kind', `This route takes an API key (sk-svc_...), not ${kindOf(cred)}`);
  }
  return r.apiKey(cred);
}

export async function resolveSession(req: FastifyRequest, r: CredentialResolvers, publicOrigin: string): Promise<SessionPrincipal> {
  const cred = bearer(req);
  const meta = { userAgent: req.headers['user-agent'] };
  if (cred) {
    if (!cred.startsWith(PREFIX.session)) {
      throw new ServiceError('wrong_credential_kind', `This route takes a session token (sess_...), not ${kindOf(cred)}`);
    }
    return r.session(cred, meta);
  }
  const cookie = readCookie(req, SESSION_COOKIE);
  if (cookie) {
    assertSameOrigin(req, publicOrigin); // a cookie is ambient: another site's page can make the browser send it
    return r.session(cookie, meta);
  }
  throw new ServiceError('authentication_required', 'This route needs a session: sign in with SIWE, then send Authorization: Bearer sess_...');
}

/**
 * Enforces each route's declared scheme before the body is read. Routes with no declaration are refused
 * at registration, so an undeclared route can never be served.
 */
export function registerAuth(app: FastifyInstance, opts: AuthOptions): void {
  app.decorateRequest('principal', null as never);

  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth;
    if (!auth || !AUTH_SCHEMES.includes(auth)) {
      throw new Error(`route ${route.method} ${route.url} declares no auth scheme`);
    }
    if (auth === 'key' && !route.config?.scope) throw new Error(`key route ${route.method} ${route.url} declares no scope`);
  });

  // A callback hook: a request whose key is cached goes on at once, without a promise or a microtask turn.
  app.addHook('onRequest', (req, _reply, done) => {
    let waiting: Promise<void> | undefined;
    try {
      waiting = authenticate(req, opts);
    } catch (e) {
      return done(e as Error);
    }
    if (waiting) waiting.then(() => done(), done);
    else done();
  });

  // A key with a model allow list (a mandate's): the models its parsed body names, before the route runs.
  app.addHook('preValidation', (req, _reply, done) => {
    const p = req.principal;
    if (p.kind !== 'key' || !p.allowLists) return done();
    try {
      for (const m of modelsOf(req.body)) assertModelAllowed(p, m);
    } catch (e) {
      return done(e as Error);
    }
    done();
  }); // mandates
}

/** Sets the request's principal by its route's scheme; a promise only when that has to wait. */
function authenticate(req: FastifyRequest, opts: AuthOptions): Promise<void> | undefined {
  const cfg = req.routeOptions.config;
  req.principal = { kind: 'none' };
  if (cfg?.unmounted) throw routeNotFound(req); // the very answer of an unknown route, whatever the credential
  switch (cfg?.auth) {
    case 'key': {
      const p = resolveKey(req, opts.resolvers);
      return p instanceof Promise ? p.then((k) => keyed(req, k, opts)) : keyed(req, p, opts);
    }
    case 'session':
    case 'admin':
    case 'metrics':
    case 'node':
      return authenticateOther(req, cfg.auth, opts);
    default:
      return undefined; // public, path_token and payment routes authenticate inside their handlers
  }
}

/** The key principal, once its scope and route allow list are checked; then the read barrier of a non-billable route. */
function keyed(req: FastifyRequest, p: KeyPrincipal, opts: AuthOptions): Promise<void> | undefined {
  const cfg = req.routeOptions.config;
  if (cfg.scope && !p.scopes.includes(cfg.scope)) {
    throw new ServiceError('insufficient_scope', `This API key lacks the "${cfg.scope}" scope`, { required_scope: cfg.scope });
  }
  if (p.allowLists) assertRouteAllowed(p, req.method, req.routeOptions.url); // mandates: the key's route allow list
  req.principal = p;
  return !cfg.billable && opts.readBarrier ? opts.readBarrier(p.accountId) : undefined;
}

/** Sessions, admin and metrics tokens, node keys. */
async function authenticateOther(req: FastifyRequest, auth: 'session' | 'admin' | 'metrics' | 'node', opts: AuthOptions): Promise<void> {
  const cfg = req.routeOptions.config;
  switch (auth) {
    case 'session':
      req.principal = await resolveSession(req, opts.resolvers, opts.publicOrigin);
      if (req.principal.org) (opts.orgRouteGate ?? denyOrgSessions)(req.principal.org.role, req.method, req.routeOptions.url);
      if (!cfg.billable && opts.readBarrier) await opts.readBarrier(req.principal.accountId);
      return;
    case 'admin':
    case 'metrics': {
      const expected = auth === 'admin' ? opts.adminToken : opts.metricsToken;
      if (!expected) throw routeNotFound(req); // unmounted: the very answer of an unknown route
      if (!tokenMatches(bearer(req), expected)) {
        throw new ServiceError('invalid_credential', `Missing or wrong ${auth} token`);
      }
      req.principal = { kind: auth };
      return;
    }
    case 'node': {
      const cred = bearer(req);
      if (!cred) throw new ServiceError('authentication_required', 'This route needs a node key: Authorization: Bearer nk-svc_...');
      if (!cred.startsWith(PREFIX.nodeKey)) {
        throw new ServiceError('wrong_credential_kind', `This route takes a node key (nk-svc_...), not ${kindOf(cred)}`);
      }
      if (!opts.resolvers.nodeKey) throw new ServiceError('invalid_credential', 'Unknown node key');
      req.principal = await opts.resolvers.nodeKey(cred);
      return;
    }
  }
}

/** Without a role table no route admits a session acting for an org. */
function denyOrgSessions(): never {
  throw new ServiceError('forbidden', 'Sessions acting for an organization are not accepted here');
}

export function requireKey(req: FastifyRequest): KeyPrincipal {
  if (req.principal.kind !== 'key') throw new Error('route is not key-authenticated');
  return req.principal;
}

export function requireSession(req: FastifyRequest): SessionPrincipal {
  if (req.principal.kind !== 'session') throw new Error('route is not session-authenticated');
  return req.principal;
}
