import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { auditDocument } from './audit.ts';
import type { ProofsDeps } from './deps.ts';
import { proofDocument } from './proof.ts';
import { Runs } from './runs.ts';
import { AuditQuery, IdParams, RunDetail, RunSummary, SignedAudit, SignedProof } from './schemas.ts';

export function runsRoutes(app: FastifyInstance, deps: ProofsDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];
  const runs = new Runs(deps.db);
  const signer = deps.signer.address;

  r.get(
    '/v1/runs',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'The 200 most recent run chains, latest activity first', response: { 200: z.object({ runs: z.array(RunSummary) }) } },
    },
    async (req) => ({ runs: await runs.list(requireSession(req).accountId) }),
  );

  r.get(
    '/v1/runs/:id',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'One run with its chained signed receipts in sequence order', params: IdParams, response: { 200: RunDetail } },
    },
    async (req) => {
      const { run, receipts } = await runs.load(requireSession(req).accountId, req.params.id);
      return runs.detail(run, receipts);
    },
  );

  r.post(
    '/v1/runs/:id/proof',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Signed run proof: head hash, receipt count, total cost, span, anchor; the chain is recomputed from the stored receipts',
        params: IdParams,
        response: { 200: SignedProof },
      },
    },
    async (req) => {
      const { run, receipts } = await runs.load(requireSession(req).accountId, req.params.id);
      // Run ids are the caller's, unique per account: the anchor's (private) reference names both.
      const anchor = await deps.anchors.track('run', `${run.account_id}/${run.id}`, run.head_hash);
      const s = deps.signer.signDocument(proofDocument(run, receipts, signer, deps.clock.now(), anchor));
      return { proof: s.document, signature: s.signature, signer: s.signer, canonical: s.canonical, scheme: s.scheme };
    },
  );

  r.post(
    '/v1/runs/:id/audit',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Signed content-free audit pack; ?framework=eu_ai_act or soc2 adds an evidence mapping (never a certification)',
        params: IdParams,
        querystring: AuditQuery,
        response: { 200: SignedAudit },
      },
    },
    async (req) => {
      const { run, receipts } = await runs.load(requireSession(req).accountId, req.params.id);
      const s = deps.signer.signDocument(auditDocument(run, receipts, signer, req.query.framework ?? null, deps.clock.now()));
      return { audit: s.document, signature: s.signature, signer: s.signer, canonical: s.canonical, scheme: s.scheme };
    },
  );
}
