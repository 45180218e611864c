import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireKey } from '../../http/auth.ts';
import { runIdOf } from '../../http/run-id.ts';
import { RunHeader } from '../inference/schemas.ts';
import type { Media } from './deps.ts';
import { JobId, ListQuery, VideoBody, VideoJob, VideoList } from './schemas.ts';

const tags = ['media'];
const cfg = { auth: 'key' as const, scope: 'inference' as const };

/** Asynchronous video jobs (vid_...): create (202), list, read, download, cancel, destroy. */
export function videoRoutes(app: FastifyInstance, m: Media): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const v = m.videos;

  r.post(
    '/v1/videos/generations',
    {
      config: cfg,
      bodyLimit: 17 * 1024 * 1024,
      schema: {
        tags,
        summary:
          'Start a render (text-to-video, or image-to-video with `image`): 202 with a vid_ job. The model\'s maximum duration is held at its per-second price (402 when it cannot be); settlement charges the actual duration and releases the rest',
        headers: RunHeader,
        body: VideoBody,
        response: { 202: VideoJob },
      },
    },
    async (req, reply) => {
      const path = '/v1/videos/generations';
      const b = req.body;
      const job = await v.create(
        requireKey(req),
        { ...b, seconds: b.seconds === undefined ? undefined : Number(b.seconds) },
        { requestId: req.id, runId: runIdOf(req), route: `POST ${path}`, resource: new URL(path, m.publicUrl).toString(), signal: new AbortController().signal },
      );
      return reply.code(202).send(job);
    },
  );

  r.get(
    '/v1/videos/generations',
    { config: cfg, schema: { tags, summary: "The caller's jobs, newest first, metadata only; ?limit= 1-200 (default 50)", querystring: ListQuery, response: { 200: VideoList } } },
    async (req) => ({ object: 'list' as const, data: await v.list(requireKey(req).accountId, req.query.limit) }),
  );

  r.get(
    '/v1/videos/generations/:id',
    { config: cfg, schema: { tags, summary: 'status, progress, cost, expires_at, asset_available, receipt and provenance manifest', params: JobId, response: { 200: VideoJob } } },
    async (req) => v.get(requireKey(req).accountId, req.params.id),
  );

  r.get(
    '/v1/videos/generations/:id/content',
    { config: cfg, schema: { tags, summary: 'The video file (video/mp4) as an attachment; owner only, while asset_available', params: JobId, response: { 200: z.any().describe('video/mp4') } } },
    async (req, reply) => {
      const file = await v.content(requireKey(req).accountId, req.params.id);
      return reply
        .type('video/mp4')
        .header('content-disposition', `attachment; filename="${req.params.id}.mp4"`)
        .header('content-length', file.bytes)
        .send(Readable.from(file.body));
    },
  );

  r.post(
    '/v1/videos/generations/:id/cancel',
    {
      config: cfg,
      schema: { tags, summary: 'Best-effort cancel: a finished render is delivered and billed (billed: true); one in progress is stopped upstream, its hold released, nothing billed', params: JobId, response: { 200: VideoJob } },
    },
    async (req) => v.cancel(requireKey(req).accountId, req.params.id),
  );

  r.delete(
    '/v1/videos/generations/:id',
    { config: cfg, schema: { tags, summary: 'Destroy the stored video now; the content-free row and its receipt remain (409 while rendering: cancel first)', params: JobId, response: { 200: VideoJob } } },
    async (req) => v.destroy(requireKey(req).accountId, req.params.id),
  );
}
