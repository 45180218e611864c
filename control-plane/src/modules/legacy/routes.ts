import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import { CONTENT_BODY_LIMIT, LIST_CAP } from './limits.ts';
import type { LegacyParties } from './parties.ts';
import { claimRoutes } from './claim-routes.ts';
import { ContentBody, CreateBody, CreatedPlan, PlanDetail, PlanList, PlanParams } from './schemas.ts';
import type { LegacyService } from './service.ts';

const tooLargeHint = 'the note and files of a plan hold at most 2 MiB of files (base64 in the body) and 64 KiB of note';

/**
 * Legacy plans (spec: assets): the owner's routes with a session; the attester's and beneficiary's routes and
 * the public claim link and page are in claim-routes.ts.
 */
export function legacyRoutes(app: FastifyInstance, d: { service: LegacyService; parties: LegacyParties }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['legacy'];
  const session = { auth: 'session' as const, tooLargeHint };
  const owner = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/legacy/plans',
    {
      config: session,
      bodyLimit: CONTENT_BODY_LIMIT,
      schema: {
        tags,
        summary: "Create a plan: sealed note and files, check-in cadence, first deadline, beneficiaries by wallet (each one's claim link returned once, stored hashed), optional attesters and quorum",
        body: CreateBody,
        response: { 201: CreatedPlan },
      },
    },
    async (req, reply) => reply.code(201).send(await d.service.create(owner(req), req.body)),
  );

  r.get(
    '/v1/legacy/plans',
    { config: session, schema: { tags, summary: `Your plans with status and deadlines, newest first (at most ${LIST_CAP}), the live-plan limit and the custody model`, response: { 200: PlanList } } },
    async (req) => d.service.list(owner(req)),
  );

  r.get(
    '/v1/legacy/plans/:id',
    {
      config: session,
      schema: { tags, summary: 'One of your plans: parties, object metadata, chained events with anchor state; never content', params: PlanParams, response: { 200: PlanDetail } },
    },
    async (req) => d.service.detail(owner(req), req.params.id),
  );

  r.post(
    '/v1/legacy/plans/:id/checkin',
    {
      config: session,
      schema: { tags, summary: 'Check in: the deadline resets to now plus the cadence, a warning ends, every attester confirmation is cleared; 409 once released or cancelled', params: PlanParams, response: { 200: PlanDetail } },
    },
    async (req) => d.service.checkin(owner(req), req.params.id),
  );

  r.put(
    '/v1/legacy/plans/:id/content',
    {
      config: session,
      bodyLimit: CONTENT_BODY_LIMIT,
      schema: { tags, summary: 'Replace note and files (earlier ciphertexts destroyed, their metadata kept); 409 once released or cancelled', params: PlanParams, body: ContentBody, response: { 200: PlanDetail } },
    },
    async (req) => d.service.replace(owner(req), req.params.id, req.body),
  );

  r.post(
    '/v1/legacy/plans/:id/cancel',
    {
      config: session,
      schema: {
        tags,
        summary: 'Cancel: ciphertexts nulled and claim links killed (they then answer 404 like unknown ones); the content-free history stays; idempotent',
        params: PlanParams,
        response: { 200: PlanDetail },
      },
    },
    async (req) => d.service.cancel(owner(req), req.params.id),
  );

  claimRoutes(app, d.parties);
}
