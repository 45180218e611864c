import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import { BUILDS_CAP, BuildList, BuildParams, BuildView, DraftBody, ListQuery, Resolved, SlugParams } from './schemas.ts';
import type { EngineService } from './service.ts';

/** Engine builds (spec: inference), session routes; the builds are called as `engine/<slug>` on the inference routes. */
export function engineRoutes(app: FastifyInstance, engine: EngineService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['engine'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/engine/builds',
    {
      config,
      schema: {
        tags,
        summary: `Draft a build: the next version of a slug (model, system prompt, parameters, guardrail policy); the system prompt is sealed and only its sha256 enters the canonical spec (RFC 8785) whose sha256 is spec_sha256; at most ${BUILDS_CAP} versions per account`,
        body: DraftBody,
        response: { 201: BuildView },
      },
    },
    async (req, reply) => reply.code(201).send(await engine.draft(me(req), req.body)),
  );

  r.get(
    '/v1/engine/builds',
    { config, schema: { tags, summary: 'Your build versions, newest first (?slug= for one slug); never a system prompt', querystring: ListQuery, response: { 200: BuildList } } },
    async (req) => engine.list(me(req), req.query.slug),
  );

  r.get(
    '/v1/engine/builds/:id',
    { config, schema: { tags, summary: 'One version with its canonical spec and spec_sha256', params: BuildParams, response: { 200: BuildView } } },
    async (req) => engine.get(me(req), req.params.id),
  );

  r.delete(
    '/v1/engine/builds/:id',
    { config, schema: { tags, summary: 'Destroy the sealed system prompt (a published version is retired with it); the row, its hash and spec stay; idempotent', params: BuildParams, response: { 200: BuildView } } },
    async (req) => engine.remove(me(req), req.params.id),
  );

  r.post(
    '/v1/engine/builds/:id/publish',
    {
      config,
      schema: { tags, summary: 'Point engine/<slug> at this version; the version it pointed at is retired in the same transaction; idempotent; 409 for a deleted build', params: BuildParams, response: { 200: BuildView } },
    },
    async (req) => engine.publish(me(req), req.params.id),
  );

  r.post(
    '/v1/engine/builds/:id/unpublish',
    { config, schema: { tags, summary: 'Retire this version: engine/<slug> and its pin engine/<slug>@<version> stop resolving (404); 409 for a draft', params: BuildParams, response: { 200: BuildView } } },
    async (req) => engine.unpublish(me(req), req.params.id),
  );

  r.get(
    '/v1/engine/resolve/:slug',
    { config, schema: { tags, summary: 'What engine/<slug> serves now: version, spec digest and the expanded configuration (the prompt as its sha256); 404 when no version is published', params: SlugParams, response: { 200: Resolved } } },
    async (req) => engine.resolve(me(req), req.params.slug),
  );
}
