import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import type { AlertsService } from './service.ts';

const Alerts = z.object({
  object: z.literal('billing_alerts'),
  balance_low_micro_usd: z.number().nullable().describe('The account threshold; null: the deployment default applies.'),
  default_micro_usd: z.number().describe('The deployment default (SVC_BALANCE_LOW_DEFAULT_MICRO_USD).'),
  effective_micro_usd: z.number().describe('The threshold in force.'),
  armed: z.boolean().describe('true: balance_low fires when the balance next falls below the threshold; false: it fired (or the balance is below it) and re-arms at or above it.'),
  balance_micro_usd: z.number(),
});

/** The balance_low webhook threshold (spec: billing alerts). */
export function alertRoutes(app: FastifyInstance, alerts: AlertsService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['billing'];

  r.get(
    '/v1/billing/alerts',
    { config: { auth: 'session' }, schema: { tags, summary: 'The balance_low webhook threshold', response: { 200: Alerts } } },
    async (req) => alerts.get(requireSession(req).accountId),
  );

  r.put(
    '/v1/billing/alerts',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Set the balance_low threshold; null means the deployment default',
        description: 'balance_low fires once each time the balance crosses from at or above the threshold to below it, and re-arms when it is back at or above it. Setting the threshold fires nothing.',
        body: z
          .object({
            balance_low_micro_usd: z.number().int().min(0, 'must be a non-negative integer (micro-USD) or null').max(Number.MAX_SAFE_INTEGER).nullable(),
          })
          .strict(),
        response: { 200: Alerts },
      },
    },
    async (req) => alerts.set(requireSession(req).accountId, req.body.balance_low_micro_usd),
  );
}
