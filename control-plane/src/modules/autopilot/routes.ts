import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import { AdoptBody, Analysis, AnalyzeBody, ProposalList, ProposalParams, ProposalView } from './schemas.ts';
import type { AutopilotService } from './service.ts';

/** Autopilot (spec: inference), session routes. Adopt is for org admins or the account's owner (orgs/roles.ts). */
export function autopilotRoutes(app: FastifyInstance, autopilot: AutopilotService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['autopilot'];
  const config = { auth: 'session' as const };

  r.post(
    '/v1/autopilot/analyze',
    {
      config,
      schema: {
        tags,
        summary:
          'Opt-in, billed: read your metered chat traffic of the window, find cheaper catalog models for your engine slugs and directly called models, evaluate each against the current configuration on your eval suites and replay capsules (metered under key_id) and store a proposal per candidate with all its evidence',
        body: AnalyzeBody,
        response: { 200: Analysis },
      },
    },
    async (req) => autopilot.analyze(requireSession(req).accountId, req.body),
  );

  r.get(
    '/v1/autopilot/proposals',
    { config, schema: { tags, summary: 'Proposals, open and decided, newest first, each with its evidence', response: { 200: ProposalList } } },
    async (req) => autopilot.list(requireSession(req).accountId),
  );

  r.get(
    '/v1/autopilot/proposals/:id',
    { config, schema: { tags, summary: 'One proposal with all its evidence (costs, pass rates, sample sizes, capsule matches)', params: ProposalParams, response: { 200: ProposalView } } },
    async (req) => autopilot.get(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/autopilot/proposals/:id/adopt',
    {
      config,
      schema: {
        tags,
        summary: 'Admin-only (org admins or the account owner): publish the candidate as a new engine version; refused for everyone, with no override, when the evidence says regression (409)',
        params: ProposalParams,
        body: AdoptBody,
        response: { 200: ProposalView },
      },
    },
    async (req) => autopilot.adopt(requireSession(req), req.params.id, req.body?.slug),
  );

  r.post(
    '/v1/autopilot/proposals/:id/reject',
    { config, schema: { tags, summary: 'Close a proposal without adopting it; idempotent; 409 once adopted', params: ProposalParams, response: { 200: ProposalView } } },
    async (req) => autopilot.reject(requireSession(req), req.params.id),
  );
}
