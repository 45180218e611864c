import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ServiceError } from '@svc/shared';
import { requireSession } from '../../http/auth.ts';
import { sendPage } from '../../http/pages.ts';
import { claimPage, claimNotFoundPage } from './page.ts';
import type { LegacyParties } from './parties.ts';
import { AttestBody, AttestResult, AttestingList, ClaimList, ClaimParams, ObjectParams, OpenedClaim, PlanParams, PublicClaim, ReleasedObject, TokenParams } from './schemas.ts';

/** The attester's and beneficiary's routes (session), and the public claim link with its page. */
export function claimRoutes(app: FastifyInstance, parties: LegacyParties): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['legacy'];
  const session = { auth: 'session' as const };
  const pub = { auth: 'public' as const };

  r.post(
    '/v1/legacy/plans/:id/attest',
    {
      config: session,
      schema: {
        tags,
        summary: 'Confirm as a named attester (a wallet of this session); counted only while the plan is in warning (409 otherwise); a plan not naming your wallet is not found',
        params: PlanParams,
        body: AttestBody,
        response: { 200: AttestResult },
      },
    },
    async (req) => parties.attest(requireSession(req), req.params.id, req.body?.wallet),
  );

  r.get(
    '/v1/legacy/attesting',
    { config: session, schema: { tags, summary: 'Plans where a wallet of yours is attester: id, name, status, deadline, your confirmation (at most 100)', response: { 200: AttestingList } } },
    async (req) => parties.attesting(requireSession(req)),
  );

  r.get(
    '/v1/legacy/claims',
    { config: session, schema: { tags, summary: 'Released plans naming a wallet of yours as beneficiary (at most 100)', response: { 200: ClaimList } } },
    async (req) => parties.claims(requireSession(req)),
  );

  r.post(
    '/v1/legacy/claims/:plan_id/open',
    {
      config: session,
      schema: {
        tags,
        summary: 'Open a released plan naming a wallet of yours: the unsealed note and the object list; the first opening chains `claimed`',
        params: ClaimParams,
        response: { 200: OpenedClaim },
      },
    },
    async (req) => parties.open(requireSession(req), req.params.plan_id),
  );

  r.get(
    '/v1/legacy/claims/:plan_id/objects/:object_id',
    { config: session, schema: { tags, summary: 'One file of a released plan naming a wallet of yours, base64', params: ObjectParams, response: { 200: ReleasedObject } } },
    async (req) => parties.object(requireSession(req), req.params.plan_id, req.params.object_id),
  );

  r.get(
    '/v1/legacy/claim/:token',
    {
      config: pub,
      schema: {
        tags,
        summary: 'A claim link: {plan_name, wallet_required, status}; unknown and cancelled links answer the same 404. Page /legacy/claim/{token}',
        params: TokenParams,
        response: { 200: PublicClaim },
      },
    },
    async (req) => parties.publicClaim(req.params.token),
  );

  r.get(
    '/legacy/claim/:token',
    {
      config: pub,
      schema: {
        tags,
        summary: 'The claim page (HTML) of a claim link: plan name, the wallet required, status and how to open it (GET /v1/legacy/claim/{token} as HTML); unknown and cancelled links are the same 404 page',
        params: TokenParams,
        produces: ['text/html'],
        response: { 200: z.string().describe('An HTML page.'), 404: z.string().describe('An HTML page: no such claim.') },
      },
    },
    async (req, reply) => {
      try {
        return sendPage(reply, claimPage(await parties.publicClaim(req.params.token)));
      } catch (e) {
        if (e instanceof ServiceError && e.type === 'not_found') return sendPage(reply, claimNotFoundPage());
        throw e;
      }
    },
  );
}
