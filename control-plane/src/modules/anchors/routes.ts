import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { AnchorDocumentSchema } from './schemas.ts';
import type { Anchors } from './service.ts';

export function anchorsRoutes(app: FastifyInstance, anchors: Anchors): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.get(
    '/v1/anchors/:root',
    {
      config: { auth: 'public' },
      schema: {
        tags: ['proofs'],
        summary: 'Every public anchor of one batch root across backends, the ordered leaves, the tree rules and how to verify on each backend',
        params: z.object({ root: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 0x-prefixed 32-byte hex hash') }),
        response: { 200: AnchorDocumentSchema },
      },
    },
    async (req) => anchors.document(req.params.root),
  );
}
