import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import type { ProofsDeps } from './deps.ts';
import { SignedSla, SlaBody } from './schemas.ts';
import { slaDocument } from './sla.ts';

export function reportsRoutes(app: FastifyInstance, deps: ProofsDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/v1/reports/sla',
    {
      config: { auth: 'session' },
      schema: {
        tags: ['money'],
        summary: 'Signed SLA report from recorded uptime telemetry; window defaults to the last 30 days, at most 366 days',
        body: SlaBody.nullish().describe('Optional; an empty body means the last 30 days.'),
        response: { 200: SignedSla },
      },
    },
    async (req) => {
      const doc = await slaDocument(deps.health, requireSession(req).accountId, req.body ?? {}, deps.clock.now());
      const s = deps.signer.signDocument(doc);
      return { report: s.document, signature: s.signature, signer: s.signer, canonical: s.canonical, scheme: s.scheme };
    },
  );
}
