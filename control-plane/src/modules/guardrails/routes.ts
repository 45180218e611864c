import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { FindingsQuery, FindingsView, GuardrailInput, GuardrailView, Mode } from './schemas.ts';
import { MAX_GUARDRAILS, type GuardrailsService } from './service.ts';

/** Guardrail rule sets (spec: quality): create, list with the mode, findings from receipts, delete. */
export function guardrailsRoutes(app: FastifyInstance, guardrails: GuardrailsService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['guardrails'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/guardrails',
    {
      config,
      schema: {
        tags,
        summary: `Create a rule set: pii, secrets, prompt_injection and blocklist detectors, each with allow, redact or block per direction (at most ${MAX_GUARDRAILS} per account); attach it to keys through a policy`,
        body: GuardrailInput,
        response: { 201: GuardrailView },
      },
    },
    async (req, reply) => reply.code(201).send(await guardrails.create(me(req), req.body)),
  );

  r.get(
    '/v1/guardrails',
    { config, schema: { tags, summary: `Your rule sets, newest first (at most ${MAX_GUARDRAILS}), with the deployment's enforcement mode`, response: { 200: z.object({ guardrails: z.array(GuardrailView), mode: Mode }) } } },
    async (req) => guardrails.list(me(req)),
  );

  r.get(
    '/v1/guardrails/findings',
    { config, schema: { tags, summary: 'Findings decoded from your newest receipts (rule, direction, category, count, severity, action, decision); never matched text', querystring: FindingsQuery, response: { 200: FindingsView } } },
    async (req) => guardrails.findings(me(req), req.query.limit),
  );

  r.delete(
    '/v1/guardrails/:id',
    {
      config,
      schema: {
        tags,
        summary: 'Delete a rule set: policies that named it skip it, so keys carrying them run unconstrained by it',
        params: z.object({ id: z.string().max(64) }),
        response: { 200: z.object({ id: z.string(), object: z.literal('guardrail'), deleted: z.literal(true) }) },
      },
    },
    async (req) => guardrails.remove(me(req), req.params.id),
  );
}
