import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { SignedCredential } from '../passports/schemas.ts';
import type { KyaService } from './service.ts';
import { KYA_LIST_CAP } from './store.ts';

const MintBody = z
  .object({
    handle: z.string().min(1).max(128).describe('A handle your account holds (POST /v1/passport claims one).'),
    key_id: z.string().min(1).max(128).optional().describe('An active API key of your account; the credential is bound to it. Required.'),
    mandate_id: z
      .string()
      .max(128)
      .optional()
      .describe('A live mandate of your account (instead of key_id): the credential binds its key, with the mandate in the binding.'),
  })
  .strict();

const KeyState = z.enum(['active', 'frozen', 'expiring', 'expired', 'revoked', 'unknown']);

const CredentialView = z.object({
  object: z.literal('kya_credential'),
  id: z.string(),
  handle: z.string(),
  key_id: z.string(),
  state: z.enum(['active', 'superseded', 'revoked']).describe('revoked, else superseded (a newer credential at the handle), else active.'),
  key_state: KeyState.describe('The bound key\'s state now, read from the keys at this request.'),
  created_at: z.string(),
  superseded_at: z.string().nullable(),
  superseded_by: z.string().nullable(),
  revoked_at: z.string().nullable(),
  credential: SignedCredential,
});
const PublicCredential = CredentialView.extend({ passport_url: z.string() });
const IdParams = z.object({ id: z.string().min(1).max(128) });
const HandleParams = z.object({ handle: z.string().min(1).max(128) });

/** KYA credentials (spec: proofs): mint, list with real state, revoke, and the public current credential at a handle. */
export function kyaRoutes(app: FastifyInstance, kya: KyaService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];

  r.post(
    '/v1/kya/credentials',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary:
          'Mint a signed KYA credential over a handle you hold, bound to an active API key of your account (key_id) or to a live mandate of yours (mandate_id); it supersedes the handle\'s current credential in the same transaction',
        body: MintBody,
        response: { 201: CredentialView },
      },
    },
    async (req, reply) => reply.code(201).send(await kya.mint(requireSession(req).accountId, req.body)),
  );

  r.get(
    '/v1/kya/credentials',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: `Your credentials, newest first (at most ${KYA_LIST_CAP}), each with its state and its bound key's state now`,
        response: { 200: z.object({ credentials: z.array(CredentialView) }) },
      },
    },
    async (req) => kya.list(requireSession(req).accountId),
  );

  r.delete(
    '/v1/kya/credentials/:id',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Revoke one of your credentials; idempotent. A revoked current credential leaves the handle with none in public', params: IdParams, response: { 200: CredentialView } },
    },
    async (req) => kya.revoke(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/kya/public/:handle',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'The current KYA credential at a handle, signed, with its key\'s state now; 404 when none was minted or the current one was revoked',
        params: HandleParams,
        response: { 200: PublicCredential },
      },
    },
    async (req) => kya.publicAt(req.params.handle),
  );
}
