import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { SCOPE_NAMES, ServiceError, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import { requireSession } from '../../http/auth.ts';
import { CONSENT_PAGE_PATH, consentScript, sendConsentPage, sendErrorPage } from './consent-page.ts';
import type { OAuthGrants } from './grants.ts';
import { authorizationServerMetadata, MCP_RESOURCE_PATH, protectedResourceMetadata } from './metadata.ts';
import { OAuthError, parseParams, singleParams } from './params.ts';
import { registerClient } from './registration.ts';
import type { OAuthService } from './service.ts';

export interface OAuthRouteDeps {
  service: OAuthService;
  grants: OAuthGrants;
  db: Kysely<DB>;
  clock: Clock;
  publicUrl: URL;
  /** What the consent page offers to sign in with: SIWE chains, and whether passkeys are configured. */
  signIn: { chainIds: number[]; passkey: boolean };
}

/** RFC 6749 §5.2 / RFC 7591 §3.2.2 error body. */
const ProtocolError = z.object({ error: z.string().describe('invalid_request, invalid_client, invalid_grant, unauthorized_client, unsupported_grant_type, invalid_scope, invalid_target; on registration invalid_redirect_uri, invalid_client_metadata.'), error_description: z.string() });
const Strings = z.array(z.string());
const AsMetadata = z.object({
  issuer: z.string(),
  authorization_endpoint: z.string(),
  token_endpoint: z.string(),
  registration_endpoint: z.string(),
  revocation_endpoint: z.string(),
  scopes_supported: Strings,
  response_types_supported: Strings,
  response_modes_supported: Strings,
  grant_types_supported: Strings,
  token_endpoint_auth_methods_supported: Strings,
  revocation_endpoint_auth_methods_supported: Strings,
  code_challenge_methods_supported: Strings,
  authorization_response_iss_parameter_supported: z.boolean(),
  client_id_metadata_document_supported: z.boolean(),
});
const PrMetadata = z.object({ resource: z.string(), authorization_servers: Strings, scopes_supported: Strings, bearer_methods_supported: Strings, resource_name: z.string() });
const Registered = z.object({
  client_id: z.string(),
  client_id_issued_at: z.number().int(),
  client_name: z.string().optional(),
  client_uri: z.string().optional(),
  redirect_uris: Strings,
  grant_types: Strings,
  response_types: Strings,
  token_endpoint_auth_method: z.literal('none'),
  scope: z.string().optional(),
});
const Tokens = z.object({
  access_token: z.string().describe('oat-svc_...: Bearer credential on the key routes its scopes cover; 1 hour.'),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  refresh_token: z.string().optional().describe('ort-svc_...: single use; each use answers a new one (a second use within 10 s answers the same).'),
  scope: z.string(),
});
const Consent = z.object({
  id: z.string(),
  object: z.literal('oauth_consent'),
  client_id: z.string(),
  client_name: z.string(),
  scopes: Strings,
  key_id: z.string().describe("The account's API key the client's tokens act through: spend, caps and receipts land on it."),
  created_at: z.string(),
  updated_at: z.string(),
  last_used_at: z.string().nullable(),
});

const scopeList = SCOPE_NAMES.join(' ');
const formBody = (properties: Record<string, { type: 'string'; description: string }>, required: string[]) => ({
  contentType: 'application/x-www-form-urlencoded',
  schema: { type: 'object', properties, required, description: 'Form-encoded (RFC 6749), or the same parameters as a JSON object of strings.' },
});
const str = (description: string) => ({ type: 'string' as const, description });
const param = (description: string) => z.unknown().optional().describe(description);

/** Token, registration and revocation answers carry secrets or refusals: never cached, readable cross-origin (no cookies are used). */
function protocolHeaders(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache').header('access-control-allow-origin', '*');
}

/** Runs a protocol endpoint: its refusals are `{error, error_description}`, not the gateway's envelope. */
async function protocol<T>(reply: FastifyReply, status: number, fn: () => Promise<T>) {
  protocolHeaders(reply);
  try {
    return reply.code(status).send(await fn());
  } catch (e) {
    if (!(e instanceof OAuthError)) throw e;
    if (e.status === 401) reply.header('www-authenticate', 'Basic realm="oauth", charset="UTF-8"');
    return reply.code(e.status).send(e.body());
  }
}

function params(req: FastifyRequest): ReturnType<typeof parseParams> {
  if (/^basic\s/i.test(req.headers.authorization ?? '')) {
    throw new OAuthError('invalid_client', 'Only public clients are served: send client_id in the body, no HTTP Basic credentials', 401);
  }
  return parseParams(req.headers['content-type'], req.body as Buffer | undefined);
}

/** The OAuth 2.1 authorization server for connectors: discovery, registration, authorization, consent, tokens. */
export function oauthRoutes(app: FastifyInstance, d: OAuthRouteDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['oauth'];
  const pub = { auth: 'public' as const };

  r.get(
    '/.well-known/oauth-authorization-server',
    { config: pub, schema: { tags, summary: 'Authorization server metadata (RFC 8414)', response: { 200: AsMetadata } } },
    async (_req, reply) => reply.header('access-control-allow-origin', '*').send(authorizationServerMetadata(d.publicUrl)),
  );

  for (const path of ['/.well-known/oauth-protected-resource', `/.well-known/oauth-protected-resource${MCP_RESOURCE_PATH}`]) {
    r.get(
      path,
      { config: pub, schema: { tags, summary: `Protected resource metadata for ${MCP_RESOURCE_PATH} (RFC 9728)`, response: { 200: PrMetadata } } },
      async (_req, reply) => reply.header('access-control-allow-origin', '*').send(protectedResourceMetadata(d.publicUrl)),
    );
  }

  r.post(
    '/v1/oauth/register',
    {
      config: {
        ...pub,
        rawBody: true,
        documentedBody: {
          contentType: 'application/json',
          schema: {
            type: 'object',
            required: ['redirect_uris'],
            properties: {
              redirect_uris: { type: 'array', items: { type: 'string' }, description: 'https, or http on 127.0.0.1, localhost or [::1] with any port; 1 to 10.' },
              token_endpoint_auth_method: { type: 'string', enum: ['none'], description: 'Public clients only.' },
              grant_types: { type: 'array', items: { type: 'string', enum: ['authorization_code', 'refresh_token'] } },
              response_types: { type: 'array', items: { type: 'string', enum: ['code'] } },
              client_name: { type: 'string' },
              client_uri: { type: 'string' },
              scope: { type: 'string', description: `Space-separated, of: ${scopeList}.` },
            },
          },
        },
      },
      schema: { tags, summary: 'Dynamic client registration (RFC 7591): public clients only; https or loopback redirect URIs', response: { 201: Registered, 400: ProtocolError } },
    },
    async (req, reply) =>
      protocol(reply, 201, async () => {
        let body: unknown;
        try {
          body = JSON.parse((req.body as Buffer | undefined)?.toString('utf8') ?? '');
        } catch {
          throw new OAuthError('invalid_client_metadata', 'The body must be JSON client metadata (application/json)');
        }
        return registerClient(d.db, d.clock, body);
      }),
  );

  r.get(
    '/v1/oauth/client',
    {
      config: pub,
      schema: {
        tags,
        summary: 'A client\'s name and whether a redirect URI is registered for it',
        querystring: z.object({ client_id: z.string().min(1).max(2000), redirect_uri: z.string().max(2000).optional() }),
        response: {
          200: z.object({
            client_id: z.string(),
            client_name: z.string(),
            metadata_document: z.boolean().describe('The client_id is the URL of its metadata document (fetched now).'),
            redirect_uri: z.string().nullable(),
            redirect_uri_registered: z.boolean().nullable().describe('Exact match; null when no redirect_uri was asked about.'),
          }),
        },
      },
    },
    async (req) => d.service.describeClient(req.query.client_id, req.query.redirect_uri),
  );

  r.get(
    '/v1/oauth/authorize',
    {
      config: pub,
      schema: {
        tags,
        summary: 'Authorization endpoint: validates the request, then redirects to the consent page (PKCE S256 required)',
        description:
          'An unknown client or a redirect URI that is not registered (exact match) is shown as an HTML error page and never redirected to. ' +
          'Any other error is redirected to the redirect URI with error, error_description, state and iss (RFC 6749 §4.1.2.1, RFC 9207).',
        querystring: z.object({
          response_type: param('code'),
          client_id: param('A registered client_id, or the https URL of a client metadata document.'),
          redirect_uri: param('Exactly one of the client\'s redirect URIs.'),
          code_challenge: param('BASE64URL(SHA256(code_verifier)).'),
          code_challenge_method: param('S256 (plain is refused).'),
          scope: param(`Space-separated, of: ${scopeList}; default mcp.`),
          state: param('Returned unchanged with the answer.'),
          resource: param(`RFC 8707: <origin>${MCP_RESOURCE_PATH} or the origin.`),
        }),
        produces: ['text/html'],
        response: { 302: z.unknown().describe('Location: the consent page, or the redirect URI with an error (no body).'), 400: z.string().describe('An HTML error page.') },
      },
    },
    async (req, reply) => {
      let p;
      try {
        p = singleParams(req.query as Record<string, unknown>);
      } catch (e) {
        if (e instanceof OAuthError) return sendErrorPage(reply, 400, e.error, e.description);
        throw e;
      }
      const out = await d.service.authorize(p);
      if (out.kind === 'error_page') return sendErrorPage(reply, out.status, out.error, out.description);
      return reply.header('cache-control', 'no-store').redirect(out.location, 302);
    },
  );

  r.get(
    CONSENT_PAGE_PATH,
    {
      config: pub,
      schema: {
        tags,
        summary: 'The consent page (HTML): shows the client and scopes; approving calls POST /v1/oauth/authorize/approve with the session cookie',
        querystring: z.object({ request: z.string().max(100).optional() }),
        produces: ['text/html'],
        response: { 200: z.string().describe('The consent page.'), 404: z.string().describe('An HTML error page: the request is unknown, expired or already answered.') },
      },
    },
    async (req, reply) => {
      try {
        return await sendConsentPage(reply, await d.service.consentView(req.query.request ?? ''), { publicUrl: d.publicUrl, chainIds: d.signIn.chainIds, passkey: d.signIn.passkey });
      } catch (e) {
        if (e instanceof ServiceError && e.type === 'not_found') return sendErrorPage(reply, 404, 'invalid_request', e.message);
        throw e;
      }
    },
  );

  consentScript.route(app, "The consent page's script: sign-in in place (passkey or browser wallet), then the answer; immutable under its ?v= content hash", tags);

  r.post(
    '/v1/oauth/authorize/approve',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Answer a pending authorization: approve (grants consent, mints the code) or deny; returns where to send the browser',
        body: z.object({ request_id: z.string().min(1).max(100), approve: z.boolean().default(true).describe('false: deny (access_denied goes back to the client).') }).strict(),
        response: { 200: z.object({ redirect_to: z.string().describe('The redirect URI with code, state and iss (or error).') }) },
      },
    },
    async (req) => d.service.approve(requireSession(req), req.body.request_id, req.body.approve),
  );

  r.post(
    '/v1/oauth/token',
    {
      config: {
        ...pub,
        rawBody: true,
        documentedBody: formBody(
          {
            grant_type: str('authorization_code or refresh_token.'),
            client_id: str('The client_id (public clients: no secret).'),
            code: str('authorization_code: the code from the redirect.'),
            redirect_uri: str('authorization_code: the redirect URI of the authorization request.'),
            code_verifier: str('authorization_code: the PKCE verifier.'),
            refresh_token: str('refresh_token: the latest refresh token.'),
            scope: str('refresh_token: optionally narrower scopes.'),
            resource: str('RFC 8707 resource indicator; must match the authorization request\'s.'),
          },
          ['grant_type', 'client_id'],
        ),
      },
      schema: { tags, summary: 'Token endpoint: authorization_code (single use, PKCE-bound) and refresh_token (rotating); form-encoded or JSON', response: { 200: Tokens, 400: ProtocolError, 401: ProtocolError } },
    },
    async (req, reply) => protocol(reply, 200, async () => d.grants.token(params(req))),
  );

  r.post(
    '/v1/oauth/revoke',
    {
      config: {
        ...pub,
        rawBody: true,
        documentedBody: formBody({ token: str('An access or refresh token.'), token_type_hint: str('access_token or refresh_token (optional).'), client_id: str('The client the token was issued to.') }, ['token']),
      },
      schema: { tags, summary: 'Revoke an access or refresh token (RFC 7009); 200 whatever the token', response: { 200: z.object({}), 400: ProtocolError, 401: ProtocolError } },
    },
    async (req, reply) =>
      protocol(reply, 200, async () => {
        await d.grants.revoke(params(req));
        return {};
      }),
  );

  r.get(
    '/v1/oauth/consents',
    { config: { auth: 'session' }, schema: { tags, summary: 'The clients this account has authorized, with scopes (bare array)', response: { 200: z.array(Consent) } } },
    async (req) => d.service.listConsents(requireSession(req).accountId),
  );

  r.delete(
    '/v1/oauth/consents/:id',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Withdraw a consent: its access and refresh tokens stop at once, and its API key is revoked',
        params: z.object({ id: z.string().max(64) }),
        response: { 200: z.object({ id: z.string(), revoked: z.literal(true) }) },
      },
    },
    async (req) => d.service.revokeConsent(requireSession(req).accountId, req.params.id),
  );
}
