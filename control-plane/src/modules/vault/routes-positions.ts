import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { Vault } from './deps.ts';
import { open, session, tags } from './routes-assets.ts';
import { IdParams } from './schemas-assets.ts';
import { ClaimLink, ClaimList, ClaimView, HoldersView, NewTransfer, Portfolio, SettledClaim, TokenParams, TransferBody, TransferList, TransferQuery } from './schemas-positions.ts';

/** Cap table, portfolio, transfers and claims. */
export function vaultPositionRoutes(app: FastifyInstance, v: Vault): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get(
    '/v1/vault/assets/:id/holders',
    { config: session, schema: { tags, summary: 'Issuer-only cap table, positions opened; holders and attesters get 403, anyone else 404', params: IdParams, response: { 200: HoldersView } } },
    async (req) => v.positions.holders(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/vault/portfolio',
    { config: session, schema: { tags, summary: "The caller's holdings opened for them, pending claims they sent, and their 20 newest transfers and distributions", response: { 200: Portfolio } } },
    async (req) => v.positions.portfolio(requireSession(req).accountId),
  );

  r.post(
    '/v1/vault/transfers',
    {
      config: session,
      schema: {
        tags,
        summary:
          "Private, value-conserving transfer from the caller's position to another account's wallet (a wallet with no account gets a claim: token shown once). Refused: more than the position (409), the caller's own wallet (400), a closed asset (409), no position (403), an asset the caller has no part in (404)",
        body: TransferBody,
        response: { 201: NewTransfer },
      },
    },
    async (req, reply) => reply.code(201).send(await v.transfers.transfer(requireSession(req).accountId, req.body)),
  );

  r.get(
    '/v1/vault/transfers',
    { config: session, schema: { tags, summary: 'Transfers sent, received, or of assets you issued, amounts opened; newest first, at most 100; `?asset_id=` narrows', querystring: TransferQuery, response: { 200: TransferList } } },
    async (req) => v.transfers.list(requireSession(req).accountId, req.query.asset_id),
  );

  r.get(
    '/v1/vault/claims',
    { config: session, schema: { tags, summary: 'Claims you sent to wallets without an account, amounts opened; complete', response: { 200: ClaimList } } },
    async (req) => v.claims.list(requireSession(req).accountId),
  );

  r.post(
    '/v1/vault/claims/:id/cancel',
    { config: session, schema: { tags, summary: 'The sender refunds an unclaimed claim to their position; cancelling again changes nothing; a settled claim is 409', params: IdParams, response: { 200: ClaimView } } },
    async (req) => v.claims.cancel(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/vault/claims/:token',
    { config: open, schema: { tags, summary: 'Claim link: the asset name and the bound wallet, never the amount; unknown and cancelled tokens answer the same 404', params: TokenParams, response: { 200: ClaimLink } } },
    async (req) => v.claims.link(req.params.token),
  );

  r.post(
    '/v1/vault/claim/:token',
    {
      config: session,
      schema: { tags, summary: "Settle a claim into the caller's position; the caller's account must hold its wallet (403 otherwise, nothing written); unknown or cancelled 404", params: TokenParams, response: { 200: SettledClaim } },
    },
    async (req) => v.claims.settle(requireSession(req).accountId, req.params.token),
  );
}
