import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { SessionOut, sessionCookie } from '../identity/routes.ts';
import { CONTROL_CHARS, MAX_PASSKEYS, NAME_MAX } from './limits.ts';
import type { PasskeysService } from './service.ts';

const B64 = (max: number) => z.string().min(1).max(max).regex(/^[A-Za-z0-9_-]+={0,2}$/, 'must be base64url');
const Name = z
  .string()
  .trim()
  .min(1)
  .max(NAME_MAX)
  .refine((s) => !CONTROL_CHARS.test(s), 'must not contain control characters')
  .describe(`A label for the passkey; trimmed, 1-${NAME_MAX} characters.`);
const Extensions = z.record(z.string(), z.unknown()).default({});
const Attachment = z.enum(['platform', 'cross-platform']).optional();

/** A PublicKeyCredential from navigator.credentials.create(), as its toJSON() writes it. */
const RegistrationCredential = z.object({
  id: B64(1400),
  rawId: B64(1400),
  type: z.literal('public-key'),
  response: z.object({
    clientDataJSON: B64(8192),
    attestationObject: B64(64 * 1024),
    transports: z.array(z.string().max(32)).max(16).optional(),
    authenticatorData: B64(64 * 1024).optional(),
    publicKey: B64(8192).optional(),
    publicKeyAlgorithm: z.number().int().optional(),
  }),
  authenticatorAttachment: Attachment,
  clientExtensionResults: Extensions,
});

/** A PublicKeyCredential from navigator.credentials.get(), as its toJSON() writes it. */
const AuthenticationCredential = z.object({
  id: B64(1400),
  rawId: B64(1400),
  type: z.literal('public-key'),
  response: z.object({
    clientDataJSON: B64(8192),
    authenticatorData: B64(64 * 1024),
    signature: B64(8192),
    userHandle: B64(128).optional().describe('Present for discoverable credentials: the account the passkey was registered to.'),
  }),
  authenticatorAttachment: Attachment,
  clientExtensionResults: Extensions,
});

const PasskeyView = z.object({
  id: z.string(),
  object: z.literal('passkey'),
  name: z.string(),
  credential_id: z.string().describe('The WebAuthn credential id (base64url), as the authenticator names it.'),
  transports: z.array(z.string()),
  device_type: z.enum(['single_device', 'multi_device']),
  backed_up: z.boolean().describe('Whether the authenticator says the passkey is synced or backed up.'),
  aaguid: z.string().describe('The authenticator model; all zeros where it does not say.'),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
});

/** WebAuthn options are passed to navigator.credentials as they are (PublicKeyCredential.parse*OptionsFromJSON). */
const CreationOptions = z
  .object({
    rp: z.object({ id: z.string().optional(), name: z.string() }),
    user: z.object({ id: z.string(), name: z.string(), displayName: z.string() }),
    challenge: z.string(),
    pubKeyCredParams: z.array(z.object({ type: z.literal('public-key'), alg: z.number() })),
    timeout: z.number().optional(),
    excludeCredentials: z.array(z.object({ id: z.string(), type: z.string(), transports: z.array(z.string()).optional() })).optional(),
    authenticatorSelection: z
      .object({ authenticatorAttachment: z.string().optional(), residentKey: z.string().optional(), requireResidentKey: z.boolean().optional(), userVerification: z.string().optional() })
      .optional(),
    hints: z.array(z.string()).optional(),
    attestation: z.string().optional(),
    extensions: z.object({ credProps: z.boolean().optional() }).optional(),
  })
  .describe('PublicKeyCredentialCreationOptionsJSON; the challenge is single-use and expires with `timeout`.');
const RequestOptions = z
  .object({
    challenge: z.string(),
    timeout: z.number().optional(),
    rpId: z.string().optional(),
    allowCredentials: z.array(z.object({ id: z.string(), type: z.string(), transports: z.array(z.string()).optional() })).optional(),
    userVerification: z.string().optional(),
    hints: z.array(z.string()).optional(),
  })
  .describe('PublicKeyCredentialRequestOptionsJSON with no allowCredentials: the browser offers the passkeys it holds for this site.');

const Params = z.object({ id: z.string() });
const Empty = z.object({}).strict().optional();

/**
 * Passkeys (spec: identity): WebAuthn sign-in beside SIWE. Without SVC_PASSKEY_RP_ID and SVC_PASSKEY_ORIGIN
 * (`passkeys` null) every route is unmounted: the unknown-route 404, and still documented.
 */
export function passkeyRoutes(app: FastifyInstance, passkeys: PasskeysService | null, opts: { secureCookie: boolean; sessionTtlSeconds: number }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['passkeys'];
  const unmounted = passkeys === null;
  const pub = { auth: 'public' as const, unmounted };
  const session = { auth: 'session' as const, unmounted };
  const svc = (): PasskeysService => passkeys!; // never null where a handler runs: unmounted routes answer 404 first
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/auth/passkey/login/options',
    { config: pub, schema: { tags, summary: 'WebAuthn assertion options for a discoverable passkey (no account named); 404 where passkeys are not configured', body: Empty, response: { 200: RequestOptions } } },
    async () => svc().loginOptions(),
  );

  r.post(
    '/v1/auth/passkey/login/verify',
    {
      config: pub,
      schema: {
        tags,
        summary: 'Verify an assertion; returns the same session (and svc_session cookie) as SIWE verify',
        body: z.object({ credential: AuthenticationCredential }).strict(),
        response: { 200: SessionOut },
      },
    },
    async (req, reply) => {
      const s = await svc().loginVerify(req.body.credential, req.headers['user-agent']);
      reply.header('set-cookie', sessionCookie(opts, s.token, opts.sessionTtlSeconds));
      return s;
    },
  );

  r.post(
    '/v1/auth/passkey/register/options',
    { config: session, schema: { tags, summary: 'WebAuthn creation options for a new passkey on the signed-in account', body: Empty, response: { 200: CreationOptions } } },
    async (req) => svc().registerOptions(requireSession(req)),
  );

  r.post(
    '/v1/auth/passkey/register/verify',
    {
      config: session,
      schema: {
        tags,
        summary: `Register a passkey on the signed-in account (at most ${MAX_PASSKEYS}); never creates an account`,
        body: z.object({ credential: RegistrationCredential, name: Name.optional() }).strict(),
        response: { 201: PasskeyView },
      },
    },
    async (req, reply) => reply.code(201).send(await svc().registerVerify(me(req), req.body.credential, req.body.name)),
  );

  r.get(
    '/v1/auth/passkeys',
    { config: session, schema: { tags, summary: 'Passkeys of the account, oldest first; metadata only (bare array)', response: { 200: z.array(PasskeyView) } } },
    async (req) => svc().list(me(req)),
  );

  r.patch(
    '/v1/auth/passkeys/:id',
    { config: session, schema: { tags, summary: 'Rename a passkey', params: Params, body: z.object({ name: Name }).strict(), response: { 200: PasskeyView } } },
    async (req) => svc().rename(me(req), req.params.id, req.body.name),
  );

  r.delete(
    '/v1/auth/passkeys/:id',
    {
      config: session,
      schema: {
        tags,
        summary: 'Remove a passkey; wallet sign-in still works, and sessions it signed in stay until they end',
        params: Params,
        response: { 200: z.object({ id: z.string(), object: z.literal('passkey'), deleted: z.literal(true) }) },
      },
    },
    async (req) => svc().remove(me(req), req.params.id),
  );
}
