import type { FastifyInstance } from 'fastify';
import type { ProofsDeps } from './deps.ts';
import { receiptsRoutes } from './routes-receipts.ts';
import { reportsRoutes } from './routes-reports.ts';
import { runsRoutes } from './routes-runs.ts';

export type { ProofsDeps } from './deps.ts';

/** Receipts (fetch, verify, share, badge), run chains (proof, audit pack) and the signed SLA report. */
export function proofsRoutes(app: FastifyInstance, deps: ProofsDeps): void {
  receiptsRoutes(app, deps);
  runsRoutes(app, deps);
  reportsRoutes(app, deps);
}
