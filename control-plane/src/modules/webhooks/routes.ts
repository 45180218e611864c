import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import { WEBHOOK_EVENTS, WEBHOOK_EVENT_TYPES } from './events.ts';
import { MAX_ATTEMPTS, RETRY_SCHEDULE_SECONDS } from './sender.ts';
import type { WebhookService } from './service.ts';

const EventType = z.enum(WEBHOOK_EVENT_TYPES).describe(Object.entries(WEBHOOK_EVENTS).map(([k, v]) => `${k}: ${v}`).join(' '));

const WebhookInput = z
  .object({
    url: z.string().min(1).max(2048).describe('http(s) URL that receives the POSTs; no credentials; never this gateway.'),
    events: z.array(EventType).min(1).max(WEBHOOK_EVENT_TYPES.length * 2).optional().describe('Event types to deliver; omitted: every event.'),
    description: z.string().trim().max(500).optional(),
  })
  .strict();

const WebhookView = z.object({
  id: z.string(),
  object: z.literal('webhook'),
  url: z.string(),
  events: z.array(z.string()).nullable().describe('null: every event.'),
  description: z.string().nullable(),
  enabled: z.boolean(),
  created_at: z.string(),
  disabled_at: z.string().nullable(),
});

const NewWebhook = WebhookView.extend({
  secret: z.string().describe('The signing secret (whsec_ + base64 key), shown this once; verify deliveries with any Standard Webhooks library.'),
});

const Attempt = z.object({
  delivery_id: z.string(),
  event_id: z.string().describe('Also the webhook-id header; stable across retries.'),
  event_type: z.string(),
  attempt: z.number().describe(`1 to ${MAX_ATTEMPTS}.`),
  status_code: z.number().nullable().describe('HTTP status of the response; null when none came (network error, timeout).'),
  error: z.string().nullable(),
  duration_ms: z.number(),
  outcome: z.enum(['delivered', 'retrying', 'failed']).describe('failed: the last attempt of the schedule failed; no more retries.'),
  next_attempt_at: z.string().nullable(),
  at: z.string(),
});

const IdParams = z.object({ id: z.string().max(64) });

const SCHEDULE = RETRY_SCHEDULE_SECONDS.map((s) => (s < 120 ? `${s} s` : s < 3600 ? `${s / 60} min` : `${s / 3600} h`)).join(', ');

/** Webhooks (spec: webhooks; Standard Webhooks signatures; durable outbox with retries). */
export function webhookRoutes(app: FastifyInstance, webhooks: WebhookService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['webhooks'];

  r.post(
    '/v1/webhooks',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Create a webhook; the signing secret is returned once',
        description:
          'Deliveries are POSTs of `{id, type, timestamp, account_id, data}` signed per Standard Webhooks (headers webhook-id, webhook-timestamp, webhook-signature). ' +
          `A failed attempt (non-2xx, redirect, network error or timeout) is retried after ${SCHEDULE}; then the delivery is marked failed.`,
        body: WebhookInput,
        response: { 201: NewWebhook },
      },
    },
    async (req, reply) => reply.code(201).send(await webhooks.create(requireSession(req).accountId, req.body)),
  );

  r.get(
    '/v1/webhooks',
    { config: { auth: 'session' }, schema: { tags, summary: 'Every webhook of the account, newest first, without secrets (bare array)', response: { 200: z.array(WebhookView) } } },
    async (req) => webhooks.list(requireSession(req).accountId),
  );

  r.delete(
    '/v1/webhooks/:id',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Disable a webhook (idempotent); its pending deliveries are cancelled', params: IdParams, response: { 200: WebhookView } },
    },
    async (req) => webhooks.disable(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/webhooks/:id/deliveries',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'The last 50 delivery attempts, newest first (bare array)', params: IdParams, response: { 200: z.array(Attempt) } },
    },
    async (req) => webhooks.attempts(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/webhooks/:id/test',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Enqueue a synthetic webhook_test event for this webhook (409 when disabled)',
        params: IdParams,
        response: { 202: z.object({ object: z.literal('event'), id: z.string(), type: z.literal('webhook_test'), webhook_id: z.string(), created_at: z.string() }) },
      },
    },
    async (req, reply) => reply.code(202).send(await webhooks.test(requireSession(req).accountId, req.params.id)),
  );
}
