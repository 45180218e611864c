import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import type { SubscriptionService } from './service.ts';

const Plan = z.object({
  id: z.string(),
  object: z.literal('plan'),
  name: z.string(),
  monthly_fee_micro_usd: z.number(),
  retention_days: z.number(),
  limits: z.record(z.string(), z.number().nullable()).describe('Published limits per plan; null: unlimited.'),
  features: z.record(z.string(), z.boolean()).describe('Per-feature flags.'),
});

const Subscription = z.object({
  object: z.literal('subscription'),
  plan: Plan,
  period_start: z.string().nullable().describe('Start of the current period (or of Free); null: never subscribed.'),
  period_end: z.string().nullable().describe('End of the paid period, when it renews or drops to Free; null on Free.'),
  auto_renew: z.boolean(),
  scheduled_plan: z.string().nullable().describe('A plan change that takes effect at period_end.'),
  fee_micro_usd: z.number().describe('The fee paid for the current period.'),
  balance_micro_usd: z.number(),
  held_micro_usd: z.number(),
  spendable_micro_usd: z.number(),
});

const PaymentRequired = z
  .object({ error: z.looseObject({ type: z.string(), message: z.string() }) })
  .describe(
    'insufficient_credit: the monthly fee cannot be covered by prepaid credit (also where SVC_BILLING_ENFORCED is off: a plan is a purchase); carries balance_micro_usd, held_micro_usd, required_micro_usd and, when a treasury and USDT contract are configured, x402 version 1 terms (x402Version, accepts). Nothing is written.',
  );

/** Plans and subscriptions (spec: billing). */
export function subscriptionRoutes(app: FastifyInstance, subs: SubscriptionService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['billing'];

  r.get(
    '/v1/billing/plans',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'Plan catalog: fees, retention, limits, per-feature flags (SVC_PLANS)',
        response: { 200: z.object({ plans: z.array(Plan), currency: z.literal('micro-USD'), period: z.literal('month') }) },
      },
    },
    async () => ({ plans: subs.plans(), currency: 'micro-USD' as const, period: 'month' as const }),
  );

  r.get(
    '/v1/billing/subscription',
    { config: { auth: 'session' }, schema: { tags, summary: 'Plan, period start and end, auto-renew, balance', response: { 200: Subscription } } },
    async (req) => subs.get(requireSession(req).accountId),
  );

  r.post(
    '/v1/billing/subscription',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Subscribe or change plan; paid plans debit the monthly fee from prepaid credit; 402 if it cannot be covered',
        description:
          'Same plan: auto-renew back on, nothing charged. From Free, or to a plan with a higher fee: immediate, the full fee now, a new period from now (no proration). ' +
          'To a plan with an equal or lower fee (Free included): scheduled for the period end, nothing charged now.',
        body: z.object({ plan: z.string().min(1).max(64).describe('A plan id from GET /v1/billing/plans.') }).strict(),
        response: {
          200: Subscription.extend({
            change: z.enum(['started', 'upgraded', 'scheduled', 'resumed', 'unchanged']),
            charged_micro_usd: z.number().describe('Debited by this call.'),
          }),
          402: PaymentRequired,
        },
      },
    },
    async (req) => subs.subscribe(requireSession(req).accountId, req.body.plan),
  );

  r.post(
    '/v1/billing/subscription/cancel',
    {
      config: { auth: 'session' },
      schema: { tags, summary: 'Turn auto-renew off; the plan runs to its period end, then drops to Free (idempotent)', response: { 200: Subscription } },
    },
    async (req) => subs.cancel(requireSession(req).accountId),
  );
}
