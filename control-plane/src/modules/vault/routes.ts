import type { FastifyInstance } from 'fastify';
import type { Vault } from './deps.ts';
import { vaultAssetRoutes } from './routes-assets.ts';
import { vaultPositionRoutes } from './routes-positions.ts';
import { vaultDistributionRoutes } from './routes-distributions.ts';
import { vaultAttestRoutes } from './routes-attest.ts';
import { vaultDocumentRoutes } from './routes-documents.ts';

/** Every vault route (spec: assets, `/v1/vault/*`). */
export function vaultRoutes(app: FastifyInstance, v: Vault): void {
  vaultAssetRoutes(app, v);
  vaultPositionRoutes(app, v);
  vaultDistributionRoutes(app, v);
  vaultAttestRoutes(app, v);
  vaultDocumentRoutes(app, v);
}
