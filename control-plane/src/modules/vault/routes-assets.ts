import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { Vault } from './deps.ts';
import { AnchorBatch, AssetBody, AssetDetail, AssetList, AssetView, IdParams, PublicChain } from './schemas-assets.ts';

export const tags = ['assets'];
export const session = { auth: 'session' as const };
export const open = { auth: 'public' as const };

/** Vault assets (spec: assets): register, list, detail, close; the public chain and anchor batch. */
export function vaultAssetRoutes(app: FastifyInstance, v: Vault): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/v1/vault/assets',
    { config: session, schema: { tags, summary: 'Register a private asset: every field sealed on its own; the issuer holds the whole issue; `asset_registered` starts its hash chain', body: AssetBody, response: { 201: AssetView } } },
    async (req, reply) => reply.code(201).send(await v.assets.register(requireSession(req).accountId, req.body)),
  );

  r.get(
    '/v1/vault/assets',
    { config: session, schema: { tags, summary: "The caller's assets: issued, held, or attested (active role); newest first, complete", response: { 200: AssetList } } },
    async (req) => v.assets.list(requireSession(req).accountId),
  );

  r.get(
    '/v1/vault/assets/:id',
    {
      config: session,
      schema: { tags, summary: 'Detail plus hash chain (payloads opened for the issuer). A caller with no part in the asset gets 404, as for an unknown id', params: IdParams, response: { 200: AssetDetail } },
    },
    async (req) => v.assets.detail(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/vault/assets/:id/close',
    {
      config: session,
      schema: { tags, summary: 'Issuer only, irreversible: chains `asset_closed` (once; closing again changes nothing); transfers are refused from then on. Holders and attesters get 403, anyone else 404', params: IdParams, response: { 200: AssetView } },
    },
    async (req) => v.assets.close(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/vault/chain/:id',
    { config: open, schema: { tags, summary: 'The content-free hash chain of a vault asset: type, time, sha256 of the sealed payload, previous hash, hash of every event, and the rule to recompute it', params: IdParams, response: { 200: PublicChain } } },
    async (req) => v.assets.publicChain(req.params.id),
  );

  r.get(
    '/v1/vault/anchors/:id',
    {
      config: open,
      schema: { tags, summary: "Anchor batch of a vault asset's chain: the RFC 6962 root over its ordered event hashes, and that root's public anchor on each configured backend (EVM transaction, Solana signature)", params: IdParams, response: { 200: AnchorBatch } },
    },
    async (req) => v.assets.publicAnchors(req.params.id),
  );
}
