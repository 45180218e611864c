import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireSession } from '../../http/auth.ts';
import type { Services } from './deps.ts';
import { CallList, Directory, PatchBody, PaymentRequiredV1, PublishBody, ServiceView, SlugParams, TermsView } from './schemas.ts';
import { CALLS_CAP } from './service.ts';
import { DIRECTORY_CAP } from './store.ts';

/**
 * The marketplace (spec: agents): publish and manage services with a session; the public directory and
 * terms; invoke paid by an x402 payment header. `/v1/services/directory` and `/v1/services/manage/:slug`
 * are literal segments, so they win over `/v1/services/:slug`.
 */
export function servicesRoutes(app: FastifyInstance, m: Services): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['services'];
  const session = { auth: 'session' as const };
  const me = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/services',
    {
      config: session,
      schema: { tags, summary: 'Publish a service: your hosted agent or HTTPS endpoint at a slug, a price per call, paid to an EVM wallet linked to the account', body: PublishBody, response: { 201: ServiceView } },
    },
    async (req, reply) => reply.code(201).send(await m.service.publish(me(req), req.body)),
  );

  r.get(
    '/v1/services',
    { config: session, schema: { tags, summary: 'Your services with delivered calls and on-chain revenue (retired ones too); complete', response: { 200: z.object({ services: z.array(ServiceView) }) } } },
    async (req) => m.service.list(me(req)),
  );

  r.get(
    '/v1/services/directory',
    { config: { auth: 'public' }, schema: { tags, summary: `Listed, enabled services with price, kind, delivered calls and the seller's passport handle; at most ${DIRECTORY_CAP}, most delivered first`, response: { 200: Directory } } },
    async () => m.service.directory(),
  );

  r.patch(
    '/v1/services/manage/:slug',
    { config: session, schema: { tags, summary: 'Update price, description, directory listing or enabled state; a retired service is not changed (409)', params: SlugParams, body: PatchBody, response: { 200: ServiceView } } },
    async (req) => m.service.update(me(req), req.params.slug, req.body),
  );

  r.delete(
    '/v1/services/manage/:slug',
    { config: session, schema: { tags, summary: 'Retire: off the directory and not invocable; the slug stays reserved and the calls stay; idempotent', params: SlugParams, response: { 200: ServiceView } } },
    async (req) => m.service.retire(me(req), req.params.slug),
  );

  r.get(
    '/v1/services/manage/:slug/calls',
    { config: session, schema: { tags, summary: `The last ${CALLS_CAP} calls: payment metadata, fingerprints and receipts; no content`, params: SlugParams, response: { 200: CallList } } },
    async (req) => m.service.calls(me(req), req.params.slug),
  );

  r.get(
    '/v1/services/:slug',
    { config: { auth: 'public' }, schema: { tags, summary: "One service's terms: price, seller payee and the x402 accepts array; a retired or unknown slug is 404", params: SlugParams, response: { 200: TermsView } } },
    async (req) => m.service.terms(req.params.slug),
  );

  r.post(
    '/v1/services/:slug/invoke',
    {
      config: { auth: 'public' }, // paid by the x402 header, read in the handler
      schema: {
        tags,
        summary:
          'Invoke a service. Without a payment: 402 with the terms (the body is x402 version 1 PaymentRequired, the gateway error object in svc_error; the PAYMENT-REQUIRED header is version 2). With X-PAYMENT (version 1) or PAYMENT-SIGNATURE (version 2): the EIP-3009 authorization is verified, submitted on chain by the gateway and confirmed (buyer to seller; never held), then the service runs; the answer carries a signed receipt and X-PAYMENT-RESPONSE. A refused payment is 402 with a reason; a failure after payment is 502 naming the settled payment; the same payment identifier replays the first answer (another payload: 409). A payment not confirmed in time is 504 naming its transaction; the same payment again resumes the call (409 in_progress while unmined, the service runs once it confirms, 402 if it reverted)',
        params: SlugParams,
        body: z.unknown().optional().describe('Any JSON: the input of the service.'),
        response: { 402: PaymentRequiredV1 },
      },
    },
    async (req, reply) => {
      const a = await m.invoker.invoke(req.params.slug, req.headers, req.body, req.id);
      return reply.code(a.status as 402).headers(a.headers).send(a.body as never); // any status; only the 402's body is declared
    },
  );
}
