import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey, requireSession } from '../../http/auth.ts';
import { CALLS_CAP } from './commitment.ts';
import { CallList, CallParams, CallView, CommitBody, PublicCall, RevealedCall } from './schemas.ts';
import type { CallsService } from './service.ts';

/**
 * Sealed calls (spec: proofs): commit, reveal, withdraw and list with a session; commit, reveal and list
 * with an API key (scope `proofs`); the public record of one call.
 */
export function callsRoutes(app: FastifyInstance, calls: CallsService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['proofs'];
  const session = { auth: 'session' as const };
  const key = { auth: 'key' as const, scope: 'proofs' as const };
  const commitSummary = 'Commit a sealed call: the gateway draws a 32-byte salt, computes commitment = sha256(salt || UTF-8 text), signs a receipt now and queues the commitment for anchoring; text and salt are sealed at rest';

  r.post(
    '/v1/calls',
    { config: session, schema: { tags, summary: commitSummary, body: CommitBody, response: { 201: CallView } } },
    async (req, reply) => {
      const s = requireSession(req);
      return reply.code(201).send(await calls.commit({ accountId: s.accountId, keyId: null }, req.body.text, { requestId: req.id, route: 'POST /v1/calls' }));
    },
  );

  r.post(
    '/v1/calls/commit',
    { config: key, schema: { tags, summary: `Key-authenticated twin of POST /v1/calls. ${commitSummary}`, body: CommitBody, response: { 201: CallView } } },
    async (req, reply) => {
      const k = requireKey(req);
      return reply.code(201).send(await calls.commit({ accountId: k.accountId, keyId: k.keyId }, req.body.text, { requestId: req.id, route: 'POST /v1/calls/commit' }));
    },
  );

  r.get(
    '/v1/calls',
    { config: session, schema: { tags, summary: `Your sealed calls, content-free, newest first; complete (an account holds at most ${CALLS_CAP})`, response: { 200: CallList } } },
    async (req) => calls.list(requireSession(req).accountId),
  );

  r.get(
    '/v1/calls/mine',
    { config: key, schema: { tags, summary: "The key's account's sealed calls, content-free, newest first; complete", response: { 200: CallList } } },
    async (req) => calls.list(requireKey(req).accountId),
  );

  r.post(
    '/v1/calls/:id/reveal',
    {
      config: session,
      schema: { tags, summary: "Reveal: returns text and salt_hex and makes them public; idempotent; 409 once withdrawn; another account's call is not found", params: CallParams, response: { 200: RevealedCall } },
    },
    async (req) => calls.reveal(requireSession(req).accountId, req.params.id),
  );

  r.post(
    '/v1/calls/commit/:id/reveal',
    {
      config: key,
      schema: { tags, summary: "Reveal a call of the key's account: text and salt_hex; idempotent; 409 once withdrawn", params: CallParams, response: { 200: RevealedCall } },
    },
    async (req) => calls.reveal(requireKey(req).accountId, req.params.id),
  );

  r.post(
    '/v1/calls/:id/withdraw',
    {
      config: session,
      schema: { tags, summary: 'Withdraw: destroys text and salt (revealed or not); commitment, receipt and anchor stay; idempotent', params: CallParams, response: { 200: CallView } },
    },
    async (req) => calls.withdraw(requireSession(req).accountId, req.params.id),
  );

  r.get(
    '/v1/calls/public/:id',
    {
      config: { auth: 'public' },
      schema: {
        tags,
        summary: 'A sealed call: commitment, signed receipt, anchor state; text and salt_hex only after reveal; a withdrawn call keeps only commitment, receipt and anchor. Page /c/{id}',
        params: CallParams,
        response: { 200: PublicCall },
      },
    },
    async (req) => calls.publicView(req.params.id),
  );
}
