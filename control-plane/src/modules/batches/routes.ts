import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireKey } from '../../http/auth.ts';
import { BATCH_URLS } from '../files/jsonl.ts';
import { fileRoutes } from '../files/routes.ts';
import type { BatchDeps } from './deps.ts';
import { BATCHES_LIST_CAP } from './service.ts';

const Ts = z.number().nullable().describe('Unix seconds.');

const BatchBody = z
  .object({
    input_file_id: z.string().min(1).max(64).describe('A file uploaded with purpose "batch"; a file feeds one batch.'),
    endpoint: z.enum(BATCH_URLS).describe("Every line's url must equal it."),
    completion_window: z.literal('24h'),
    metadata: z
      .record(z.string().min(1).max(64), z.string().max(512))
      .refine((m) => Object.keys(m).length <= 16, 'at most 16 key-value pairs')
      .nullable()
      .optional(),
  })
  .strict();

const BatchObject = z.object({
  id: z.string().describe('batch_...'),
  object: z.literal('batch'),
  endpoint: z.string(),
  errors: z.object({ object: z.literal('list'), data: z.array(z.object({ code: z.string(), message: z.string(), param: z.string().nullable(), line: z.number().nullable() })) }).nullable(),
  input_file_id: z.string(),
  completion_window: z.string(),
  status: z.enum(['validating', 'in_progress', 'finalizing', 'completed', 'failed', 'expired', 'cancelling', 'cancelled']),
  output_file_id: z.string().nullable().describe('JSONL of the lines answered 2xx, each with its signed receipt.'),
  error_file_id: z.string().nullable().describe('JSONL of failed lines and of lines that never ran.'),
  created_at: z.number(),
  in_progress_at: Ts,
  expires_at: Ts,
  finalizing_at: Ts,
  completed_at: Ts,
  failed_at: Ts,
  expired_at: Ts,
  cancelling_at: Ts,
  cancelled_at: Ts,
  request_counts: z.object({ total: z.number(), completed: z.number(), failed: z.number() }),
  metadata: z.record(z.string(), z.string()).nullable(),
});

const IdParams = z.object({ id: z.string().max(64) });
const cfg = { auth: 'key', scope: 'files' } as const;

/** Files and batches (spec: File, Batch; OpenAI's /v1/files and /v1/batches shapes). */
export function batchRoutes(app: FastifyInstance, d: BatchDeps): void {
  fileRoutes(app, d.files);
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['batches'];
  const discount = d.files.cfg.discountPercent;

  r.post(
    '/v1/batches',
    {
      config: cfg,
      schema: {
        tags,
        summary: 'Create a batch from an uploaded file; each line is metered and receipted like a live call',
        description:
          'The lines run on the gateway under the key that created the batch (it also needs the inference scope); a revoked or frozen key fails the remaining lines. ' +
          `When the batch ends (completed, failed, expired, cancelled) the input file's content is destroyed.${discount ? ` Lines are charged ${100 - discount}% of the list price.` : ''}`,
        body: BatchBody,
        response: { 200: BatchObject },
      },
    },
    async (req) => d.batches.create(requireKey(req), req.body),
  );

  r.get(
    '/v1/batches',
    {
      config: cfg,
      schema: {
        tags,
        summary: `Your batches with request counts, newest first (at most ${BATCHES_LIST_CAP} a page; has_more and after as OpenAI)`,
        querystring: z.object({ limit: z.coerce.number().int().min(1).max(BATCHES_LIST_CAP).optional(), after: z.string().max(64).optional() }),
        response: { 200: z.object({ object: z.literal('list'), data: z.array(BatchObject), first_id: z.string().nullable(), last_id: z.string().nullable(), has_more: z.boolean() }) },
      },
    },
    async (req) => d.batches.list(requireKey(req).accountId, req.query),
  );

  r.get('/v1/batches/:id', { config: cfg, schema: { tags, summary: 'Status, request counts and result file ids', params: IdParams, response: { 200: BatchObject } } }, async (req) =>
    d.batches.get(requireKey(req).accountId, req.params.id),
  );

  r.post(
    '/v1/batches/:id/cancel',
    { config: cfg, schema: { tags, summary: 'Cancel: cancelling, then cancelled; lines already run stay billed and in the output file', params: IdParams, response: { 200: BatchObject } } },
    async (req) => d.batches.cancel(requireKey(req).accountId, req.params.id),
  );
}
