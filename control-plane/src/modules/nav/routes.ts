import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { AssetParams, CalculateBody, HistoryQuery, NavEvidence, NavHistory, NavRecordView, OwnerNavView, PublicQuery, PublishBody, RefreshBody } from './schemas.ts';
import type { NavService } from './service.ts';

/**
 * Private NAV (spec: assets): calculate and refresh (metered) and publish (free) with an API key (scope
 * `proofs`); the public reads of published versions, where a missing, never calculated or unpublished asset is
 * the same 404.
 */
export function navRoutes(app: FastifyInstance, svc: NavService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['assets'];
  const key = { auth: 'key' as const, scope: 'proofs' as const };
  const notFoundNote = 'An unknown asset, one never calculated and one with nothing published answer the same 404';

  r.post(
    '/v1/nav/calculate',
    {
      config: { ...key, billable: true },
      schema: {
        tags,
        summary:
          'Private NAV from a submitted book (holdings with quantities and declared prices or HTTPS price sources, cash, liabilities, a share count or a token supply on chain), computed with exact decimals; stores the next signed version with the evidence of every input; the book is sealed and never published. A required input missing (no price, a source down): UNAVAILABLE with no figures. Metered. A negative share count, a mismatched currency or an unknown chain is a 400 with nothing written; an asset id held by another account is a 409',
        body: CalculateBody,
        response: { 201: OwnerNavView },
      },
    },
    async (req, reply) => {
      const out = await svc.calculate(requireKey(req), req.body, { requestId: req.id, runId: runIdOf(req) });
      setReceiptHeaders(reply, out.receipt);
      return reply.code(201).send(out.view);
    },
  );

  r.post(
    '/v1/nav/:asset_id/refresh',
    {
      config: { ...key, billable: true },
      schema: {
        tags,
        summary: "Recompute the latest version's sealed book against the current clock (declared prices older than the freshness window make it STALE; HTTPS prices and the on-chain supply are read again), optionally with a newly observed on-chain supply as the share count; a new version. Metered",
        params: AssetParams,
        body: RefreshBody,
        response: { 201: OwnerNavView },
      },
    },
    async (req, reply) => {
      const out = await svc.refresh(requireKey(req), req.params.asset_id, req.body.supply, { requestId: req.id, runId: runIdOf(req) });
      setReceiptHeaders(reply, out.receipt);
      return reply.code(201).send(out.view);
    },
  );

  r.post(
    '/v1/nav/:asset_id/publish',
    { config: key, schema: { tags, summary: 'Make a version public (body {nav_id?}, default the latest): its figures, signed document and evidence references, never the book. Free, idempotent', params: AssetParams, body: PublishBody, response: { 200: OwnerNavView } } },
    async (req) => svc.publish(requireKey(req).accountId, req.params.asset_id, req.body.nav_id),
  );

  r.get(
    '/v1/nav/:asset_id',
    { config: { auth: 'public' }, schema: { tags, summary: `The latest published NAV version, signed; ?nav_id= selects a published one. ${notFoundNote}`, params: AssetParams, querystring: PublicQuery, response: { 200: NavRecordView } } },
    async (req) => svc.publicRecord(req.params.asset_id, req.query.nav_id),
  );

  r.get(
    '/v1/nav/:asset_id/history',
    { config: { auth: 'public' }, schema: { tags, summary: `Published versions newest first; ?limit= 1-200, default 50. ${notFoundNote}`, params: AssetParams, querystring: HistoryQuery, response: { 200: NavHistory } } },
    async (req) => svc.publicHistory(req.params.asset_id, req.query.limit),
  );

  r.get(
    '/v1/nav/:asset_id/evidence',
    { config: { auth: 'public' }, schema: { tags, summary: `Provenance of a published version (?nav_id=, default the latest): source kind, label, retrieval time, sha256 of each input. References only. ${notFoundNote}`, params: AssetParams, querystring: PublicQuery, response: { 200: NavEvidence } } },
    async (req) => svc.publicEvidence(req.params.asset_id, req.query.nav_id),
  );
}
