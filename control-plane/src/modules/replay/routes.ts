import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireSession } from '../../http/auth.ts';
import { CAPSULES_CAP, CapsuleDetail, CapsuleList, CapsuleParams, CapsuleView, RecordBody, ReplayBody, ReplayView } from './schemas.ts';
import type { ReplayService } from './service.ts';

/** Replay capsules (spec: inference), session routes; recordings and replays are metered under an API key of the account. */
export function replayRoutes(app: FastifyInstance, replay: ReplayService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['replay'];
  const config = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/replay/capsules',
    {
      config,
      schema: {
        tags,
        summary: `Record one chat request (confirm_seal: true required): it runs once under key_id (metered, receipted) for the baseline output fingerprint, then is sealed and never returned; at most ${CAPSULES_CAP} per account`,
        body: RecordBody,
        response: { 201: CapsuleView },
      },
    },
    async (req, reply) => reply.code(201).send(await replay.record(me(req), req.body)),
  );

  r.get(
    '/v1/replay/capsules',
    { config, schema: { tags, summary: 'Your capsules, newest first, content-free (fingerprints, counts, receipt ids)', response: { 200: CapsuleList } } },
    async (req) => replay.list(me(req)),
  );

  r.get(
    '/v1/replay/capsules/:id',
    { config, schema: { tags, summary: 'One capsule with its replay history (newest first), content-free', params: CapsuleParams, response: { 200: CapsuleDetail } } },
    async (req) => replay.get(me(req), req.params.id),
  );

  r.delete(
    '/v1/replay/capsules/:id',
    { config, schema: { tags, summary: 'Destroy the sealed request; the row, its fingerprints and replay history stay; idempotent', params: CapsuleParams, response: { 200: CapsuleView } } },
    async (req) => replay.remove(me(req), req.params.id),
  );

  r.post(
    '/v1/replay/capsules/:id/replay',
    {
      config,
      schema: {
        tags,
        summary: 'Re-run the request through the metered path (under the capsule\'s key or key_id) and report whether the output fingerprint differs from the baseline, never what changed; 410 once the capsule was deleted',
        params: CapsuleParams,
        body: ReplayBody,
        response: { 200: ReplayView },
      },
    },
    async (req) => replay.replay(me(req), req.params.id, req.body?.key_id),
  );
}
