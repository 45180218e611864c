import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { ServiceError } from '@svc/shared';
import { requireSession } from '../../http/auth.ts';
import type { Darkpool } from './deps.ts';
import type { AskTrace } from './matches.ts';
import { AssetParams, IdParams, IntentBody, IntentView, MarketStatus, MatchBody, MatchResult, MatchView, SettleBody } from './schemas.ts';

/**
 * The dark pool (spec: assets): intents, matches and market status, all with a session. Off unless the operator
 * enables it: every route then answers 501, after authentication and before the body is looked at.
 */
export function darkpoolRoutes(app: FastifyInstance, d: Darkpool): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['darkpool'];
  const config = { auth: 'session' as const };
  const preValidation = async () => {
    if (!d.config.enabled) throw new ServiceError('not_enabled', 'The dark pool is not enabled on this gateway (the operator sets SVC_DARKPOOL_ENABLED=true)', { reason: 'darkpool_disabled' });
  };
  const opts = { config, preValidation };
  const who = (req: Parameters<typeof requireSession>[0]) => requireSession(req).accountId;

  r.post(
    '/v1/intents',
    { ...opts, schema: { tags, summary: 'Submit an indication of interest: terms sealed at rest (asset, side, size, limit price, settlement address); 501 unless the operator enabled the dark pool', body: IntentBody, response: { 201: IntentView } } },
    async (req, reply) => reply.code(201).send(await d.intents.create(who(req), req.body)),
  );

  r.get(
    '/v1/intents/:id',
    { ...opts, schema: { tags, summary: 'Your own intent, terms opened, with its append-only history; another account\'s is not found', params: IdParams, response: { 200: IntentView } } },
    async (req) => d.intents.get(who(req), req.params.id),
  );

  r.post(
    '/v1/intents/:id/cancel',
    { ...opts, schema: { tags, summary: 'Withdraw a resting intent; idempotent; 409 once matched', params: IdParams, response: { 200: IntentView } } },
    async (req) => d.intents.cancel(who(req), req.params.id),
  );

  r.post(
    '/v1/matches',
    {
      ...opts,
      schema: {
        tags,
        summary: 'Ask whether a counterparty exists for one of your intents (a match is made at once when one does); the negative answer is one fixed body, the same status, size and timing whatever the reason',
        body: MatchBody,
        response: { 200: MatchResult },
      },
    },
    async (req, reply) => {
      const trace: AskTrace | undefined = d.traceAnswers ? { lookups: [], book: null, scanned: 0 } : undefined;
      const answer = await d.matches.ask(who(req), req.body.intent_id, trace);
      // Every answer leaves no earlier than the floor after the request arrived: the time a search took says nothing.
      const elapsed = reply.elapsedTime;
      const wait = d.config.matchFloorMs - elapsed;
      if (trace) d.traceAnswers?.({ ...trace, answer: answer.matched ? 'matched' : 'no_match', floor_ms: d.config.matchFloorMs, elapsed_ms: elapsed, held_ms: Math.max(0, wait) });
      if (wait > 0) await sleep(wait);
      else if (d.config.matchFloorMs > 0) req.log.warn({ elapsed_ms: Math.round(elapsed) }, 'a match answer took longer than SVC_DARKPOOL_MATCH_FLOOR_MS: its timing is not hidden; raise the floor');
      return answer;
    },
  );

  r.get(
    '/v1/matches/:id',
    { ...opts, schema: { tags, summary: 'A match you are party to; the counterparty only as a settlement address, once both confirmed', params: IdParams, response: { 200: MatchView } } },
    async (req) => d.matches.get(who(req), req.params.id),
  );

  r.post(
    '/v1/matches/:id/confirm',
    { ...opts, schema: { tags, summary: 'Confirm your side; idempotent. Once both confirmed the gateway signs the settlement instruction and each side sees the other\'s settlement address', params: IdParams, response: { 200: MatchView } } },
    async (req) => d.matches.confirm(who(req), req.params.id),
  );

  r.post(
    '/v1/matches/:id/settle',
    {
      ...opts,
      schema: {
        tags,
        summary: 'The buyer submits the hash of the USDT transfer to the seller\'s settlement address: verified on chain and receipted (cash leg VERIFIED, asset leg UNAVAILABLE); 202 while confirmations are missing; 403 for the seller',
        params: IdParams,
        body: SettleBody,
        response: { 200: MatchView, 202: MatchView },
      },
    },
    async (req, reply) => {
      const out = await d.matches.settle(who(req), req.params.id, req.body.tx_hash);
      return reply.code(out.status).send(out.body);
    },
  );

  r.get(
    '/v1/markets/:asset_id/status',
    { ...opts, schema: { tags, summary: 'Eligibility rules of one market and your own participation; never depth, counts or last price', params: AssetParams, response: { 200: MarketStatus } } },
    async (req) => d.intents.market(who(req), req.params.asset_id),
  );
}
