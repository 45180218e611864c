import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { Vault } from './deps.ts';
import { session, tags } from './routes-assets.ts';
import { IdParams } from './schemas-assets.ts';
import { DistributeBody, DistributionList, DistributionQuery, DistributionView } from './schemas-distributions.ts';

/** Pro-rata distributions. */
export function vaultDistributionRoutes(app: FastifyInstance, v: Vault): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/v1/vault/assets/:id/distribute',
    {
      config: session,
      schema: {
        tags,
        summary: 'Issuer only: record a pro-rata payout over current positions (each floor(amount × position ÷ basis), the remainder stated); moves no principal. Holders and attesters 403, anyone else 404; no positions 409',
        params: IdParams,
        body: DistributeBody,
        response: { 201: DistributionView },
      },
    },
    async (req, reply) => reply.code(201).send(await v.distributions.distribute(requireSession(req).accountId, req.params.id, req.body)),
  );

  r.get(
    '/v1/vault/distributions',
    { config: session, schema: { tags, summary: 'Distributions of assets you issued (every allocation) or were allocated in (your own); newest first, at most 200; `?asset_id=` narrows', querystring: DistributionQuery, response: { 200: DistributionList } } },
    async (req) => v.distributions.list(requireSession(req).accountId, req.query.asset_id),
  );
}
