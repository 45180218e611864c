import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { invalid, isAddress } from '@svc/shared';
import { SESSION_COOKIE, requireSession } from '../../http/auth.ts';
import type { IdentityService } from './service.ts';

const SiweBody = z.object({
  message: z.string().min(1).max(4096).describe('The EIP-4361 message, exactly as signed.'),
  signature: z.string().min(1).max(200).describe('EIP-191 signature, 0x-hex, 65 bytes.'),
});
const Wallet = z.object({ address: z.string(), linked_at: z.string() });
/** What every sign-in answers (SIWE and passkeys alike). */
export const SessionOut = z.object({
  token: z.string().describe('The sess_ token; also set as the HttpOnly svc_session cookie.'),
  session_id: z.string(),
  account_id: z.string(),
  wallet_address: z.string(),
  expires_at: z.string(),
  created_account: z.boolean(),
});
const Revoked = z.object({ revoked: z.number().int() });

/** The Set-Cookie value of every sign-in (SIWE and passkeys alike) and of logout (empty, Max-Age 0). */
export function sessionCookie(opts: { secureCookie: boolean }, value: string, maxAge: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${opts.secureCookie ? '; Secure' : ''}`;
}

export function identityRoutes(app: FastifyInstance, identity: IdentityService, opts: { secureCookie: boolean; sessionTtlSeconds: number; passkey?: boolean }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['identity'];
  const cookie = (value: string, maxAge: number) => sessionCookie(opts, value, maxAge);

  r.post(
    '/v1/auth/nonce',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'A single-use SIWE nonce (EIP-4361), valid 5 minutes', response: { 200: z.object({ nonce: z.string(), expires_at: z.string() }) } },
    },
    async () => identity.issueNonce(),
  );

  r.post(
    '/v1/auth/verify',
    { config: { auth: 'public' }, schema: { tags, summary: 'Verify a signed SIWE message; returns a session', body: SiweBody, response: { 200: SessionOut } } },
    async (req, reply) => {
      const s = await identity.signIn(req.body.message, req.body.signature, req.headers['user-agent']);
      reply.header('set-cookie', cookie(s.token, opts.sessionTtlSeconds));
      return s;
    },
  );

  r.get(
    '/v1/auth/capabilities',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'Sign-in methods offered', response: { 200: z.object({ siwe: z.boolean(), passkey: z.boolean(), session_cookie: z.boolean() }) } },
    },
    async () => ({ siwe: true, passkey: opts.passkey ?? false, session_cookie: true }),
  );

  r.get(
    '/v1/auth/me',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'The signed-in account', response: { 200: z.object({ account_id: z.string(), wallet_address: z.string().nullable() }) } },
    },
    async (req) => identity.me(requireSession(req)),
  );

  r.post(
    '/v1/auth/logout',
    { config: { auth: 'session' }, schema: { tags, summary: 'Invalidate the current session', response: { 200: Revoked } } },
    async (req, reply) => {
      reply.header('set-cookie', cookie('', 0));
      return identity.logout(requireSession(req));
    },
  );

  r.post(
    '/v1/auth/logout-all',
    { config: { auth: 'session' }, schema: { tags, summary: 'Invalidate every session of the account', response: { 200: Revoked } } },
    async (req, reply) => {
      reply.header('set-cookie', cookie('', 0));
      return identity.logoutAll(requireSession(req).accountId);
    },
  );

  r.get(
    '/v1/auth/sessions',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Live sessions (bare array)',
        response: {
          200: z.array(
            z.object({
              id: z.string(),
              current: z.boolean(),
              wallet_address: z.string().nullable(),
              user_agent: z.string().nullable(),
              created_at: z.string(),
              last_seen_at: z.string(),
              expires_at: z.string(),
            }),
          ),
        },
      },
    },
    async (req) => identity.listSessions(requireSession(req)),
  );

  r.get(
    '/v1/auth/wallets',
    { config: { auth: 'session' }, schema: { tags, summary: 'Linked wallets (bare array)', response: { 200: z.array(Wallet) } } },
    async (req) => identity.listWallets(requireSession(req).accountId),
  );

  r.post(
    '/v1/auth/wallets',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Link a wallet with a SIWE proof signed by it', body: SiweBody, response: { 200: Wallet, 201: Wallet } },
    },
    async (req, reply) => {
      const res = await identity.linkWallet(requireSession(req).accountId, req.body.message, req.body.signature);
      return reply.code(res.created ? 201 : 200).send(res.wallet);
    },
  );

  r.delete(
    '/v1/auth/wallets/:addr',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Unlink a wallet; the last one is refused', params: z.object({ addr: z.string() }), response: { 200: z.object({ address: z.string(), unlinked: z.boolean() }) } },
    },
    async (req) => {
      if (!isAddress(req.params.addr)) throw invalid('addr: not a 0x-prefixed 20-byte address', 'addr');
      await identity.unlinkWallet(requireSession(req).accountId, req.params.addr);
      return { address: req.params.addr, unlinked: true };
    },
  );
}
