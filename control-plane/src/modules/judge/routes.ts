import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ServiceError } from '@svc/shared';
import { requireKey } from '../../http/auth.ts';
import { html, sendPage } from '../../http/pages.ts';
import { PAGE_STYLE } from '../pages/parts.ts';
import { verdictScript } from './assets.ts';
import { verdictPage } from './page.ts';
import { CreatedVerdict, ListQuery, PublicVerdict, PublishInput, VerdictInput, VerdictList, VerdictParams, VerdictView } from './schemas.ts';
import type { JudgeService } from './service.ts';

/**
 * Judge verdicts (spec: quality): ask, list, read, publish and unpublish with an API key (scope `proofs`;
 * asking also needs `inference`: each juror is a chat completion of the key); the public record of a
 * published verdict and its page `/j/{id}`, which verifies it in the browser.
 */
export function judgeRoutes(app: FastifyInstance, d: { judge: JudgeService; signerAddress: string }): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['quality'];
  const key = { auth: 'key' as const, scope: 'proofs' as const };

  r.post(
    '/v1/judge/verdicts',
    {
      config: key,
      schema: {
        tags,
        summary:
          'Ask 1 to 5 distinct juror models one question with options over labeled evidence: each juror is a metered, receipted chat completion of this key (which also needs the inference scope) answering with a JSON vote and rationale, or abstaining with the reason; returns the signed outcome (models, evidence root, votes, tally, fingerprints of question and rationales), queued for anchoring. Question and rationales are returned once and not stored',
        body: VerdictInput,
        response: { 201: CreatedVerdict },
      },
    },
    async (req, reply) => reply.code(201).send(await d.judge.create(requireKey(req), req.body, { requestId: req.id })),
  );

  r.get(
    '/v1/judge/verdicts',
    { config: key, schema: { tags, summary: "The key's account's verdicts, newest first, content-free; ?limit= 1 to 200, default 50", querystring: ListQuery, response: { 200: VerdictList } } },
    async (req) => d.judge.list(requireKey(req).accountId, req.query.limit),
  );

  r.get(
    '/v1/judge/verdicts/:id',
    { config: key, schema: { tags, summary: 'One verdict: votes, signed outcome, anchor state; content-free', params: VerdictParams, response: { 200: VerdictView } } },
    async (req) => d.judge.get(requireKey(req).accountId, req.params.id),
  );

  r.post(
    '/v1/judge/verdicts/:id/publish',
    {
      config: key,
      schema: {
        tags,
        summary: 'Publish: re-supply the question and rationales; each must hash to its signed fingerprint (else 400 fingerprint_mismatch naming the field, nothing changes); they are then sealed and served at GET /v1/judge/public/{id} and the page /j/{id}',
        params: VerdictParams,
        body: PublishInput,
        response: { 200: PublicVerdict },
      },
    },
    async (req) => d.judge.publish(requireKey(req).accountId, req.params.id, req.body),
  );

  r.post(
    '/v1/judge/verdicts/:id/unpublish',
    { config: key, schema: { tags, summary: 'Unpublish: closes the public record and page and destroys the sealed question and rationales; the signed outcome stays; idempotent', params: VerdictParams, response: { 200: VerdictView } } },
    async (req) => d.judge.unpublish(requireKey(req).accountId, req.params.id),
  );

  r.get(
    '/v1/judge/public/:id',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'A published verdict: question, options, per-juror votes and rationales, evidence root, signed outcome, anchor. Unknown and unpublished ids are the same 404. Page /j/{id}',
        params: VerdictParams,
        response: { 200: PublicVerdict },
      },
    },
    async (req) => d.judge.publicView(req.params.id),
  );

  r.get(
    '/j/:id',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'The page of a published verdict (HTML), verified in the browser (GET /v1/judge/public/{id} as HTML); unknown and unpublished ids are the same 404',
        params: z.object({ id: z.string().min(1).max(64) }),
        produces: ['text/html'],
        response: { 200: z.string().describe('An HTML page.'), 404: z.string().describe('An HTML page: no published verdict here.') },
      },
    },
    async (req, reply) => {
      let v;
      try {
        v = await d.judge.publicView(req.params.id);
      } catch (e) {
        if (e instanceof ServiceError && e.type === 'not_found') {
          return sendPage(reply, { status: 404, title: 'Not found', style: PAGE_STYLE, body: html`<h1>Not found</h1><p>No published verdict here: the link is wrong, or it is not public.</p>` });
        }
        throw e;
      }
      return sendPage(reply, { ...verdictPage(v, d.signerAddress), style: PAGE_STYLE, scriptSrc: await verdictScript.src(reply) });
    },
  );

  verdictScript.route(app, "The verdict page's verification script (EIP-191 recovery, sha256 fingerprints, the evidence root, the tally, RFC 6962 inclusion proof), bundled from @noble/curves and @noble/hashes; immutable under its ?v= content hash", tags);
}
