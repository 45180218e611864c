import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Clock } from '@svc/shared';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { requireKey, requireSession } from '../../http/auth.ts';
import type { Cursors } from '../../http/cursor.ts';
import { dateTime } from '../../http/fields.ts';
import { SseStream } from '../../http/sse.ts';
import { LedgerService } from './ledger.ts';
import type { Metering } from './metering.ts';
import type { ReceiptSigner } from './signer.ts';
import { REPLAY_MAX, UsageStreams } from './usage-stream.ts';
import { usageCsv } from './usage-view.ts';
import { UsageService } from './usage.ts';

const Position = z.object({
  balance_micro_usd: z.number().describe('Sum of the append-only ledger.'),
  held_micro_usd: z.number().describe('Reserved by requests in flight that hold on their own.'),
  leased_micro_usd: z
    .number()
    .describe('Set aside by gateway processes to admit this account\'s requests without a database round trip (credit leases; requests in flight reserve from it). Still this account\'s to spend; given back when idle.'),
  spendable_micro_usd: z.number().describe('balance minus held.'),
  billing_enforced: z.boolean().describe('When false, requests are metered and receipted but never refused for credit.'),
});
const UsageEvent = z.object({
  id: z.string(),
  object: z.literal('usage_event'),
  seq: z.number(),
  request_id: z.string(),
  receipt_id: z.string(),
  kind: z.string(),
  route: z.string(),
  model: z.string().nullable(),
  key_id: z.string().nullable(),
  run_id: z.string().nullable(),
  units: z.record(z.string(), z.union([z.number(), z.string()])),
  cost_micro_usd: z.number(),
  created_at: z.string(),
});
const ByKind = z.array(z.object({ kind: z.string(), events: z.number(), cost_micro_usd: z.number() }));
const limitParam = (def: number) => z.coerce.number().int().min(1).max(1000).default(def);
const Signed = { signature: z.string(), signer: z.string(), scheme: z.string(), canonical: z.string() };

export interface MoneyDeps {
  metering: Metering;
  cursors: Cursors;
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  database: Database;
}

export function moneyRoutes(app: FastifyInstance, deps: MoneyDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['money'];
  const ledger = new LedgerService(deps.db, deps.cursors);
  const usage = new UsageService(deps.db, deps.clock, deps.cursors, deps.signer);
  const streams = new UsageStreams(deps.db);
  app.addHook('onReady', async () => streams.start(deps.database));
  app.addHook('onClose', async () => streams.stop());

  r.get(
    '/v1/credit',
    { config: { auth: 'key', scope: 'billing' }, schema: { tags, summary: "The key's account credit: balance, held and spendable", response: { 200: Position } } },
    async (req) => deps.metering.position(requireKey(req).accountId),
  );

  r.get(
    '/v1/billing/balance',
    { config: { auth: 'session' }, schema: { tags, summary: 'Credit position with held and spendable', response: { 200: Position } } },
    async (req) => deps.metering.position(requireSession(req).accountId),
  );

  r.get(
    '/v1/billing/ledger',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Append-only credit ledger, newest first; pass next_cursor back as ?cursor= while has_more',
        querystring: z.object({ limit: limitParam(200), cursor: z.string().max(512).optional() }),
        response: {
          200: z.object({
            entries: z.array(z.object({ id: z.number(), kind: z.string(), amount_micro_usd: z.number(), balance_after_micro_usd: z.number(), ref: z.string().nullable(), created_at: z.string() })),
            next_cursor: z.string().nullable(),
            has_more: z.boolean(),
          }),
        },
      },
    },
    async (req) => ledger.page(requireSession(req).accountId, req.query.limit, req.query.cursor),
  );

  r.get(
    '/v1/usage',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Lifetime totals, the 25 latest events and 14 daily buckets (UTC), and those 14 days by model and by key',
        response: {
          200: z.object({
            totals: z.object({ events: z.number(), cost_micro_usd: z.number(), by_kind: ByKind }),
            events: z.array(UsageEvent),
            daily: z.array(z.object({ date: z.string(), events: z.number(), cost_micro_usd: z.number() })),
            by_model: z.array(z.object({ model: z.string().nullable(), events: z.number(), cost_micro_usd: z.number() })).describe('The days of `daily` by model (null: events without one), most spent first.'),
            by_key: z.array(z.object({ key_id: z.string().nullable(), events: z.number(), cost_micro_usd: z.number() })).describe('The days of `daily` by API key (null: events without one), most spent first.'),
          }),
        },
      },
    },
    async (req) => usage.summary(requireSession(req).accountId),
  );

  r.get(
    '/v1/usage/events',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Metering events, newest first, with filters; ?format=csv for CSV (next cursor in the x-next-cursor header)',
        querystring: z.object({
          limit: limitParam(100),
          cursor: z.string().max(512).optional(),
          kind: z.string().max(64).optional(),
          key_id: z.string().max(64).optional(),
          run_id: z.string().max(128).optional(),
          model: z.string().max(200).optional().describe('Only events of this model.'),
          route: z.string().max(200).optional().describe('Only events of this route, as events name it (e.g. POST /v1/chat/completions).'),
          since: dateTime().optional().describe('ISO 8601 date-time (1970 to 9999).'),
          until: dateTime().optional().describe('ISO 8601 date-time (1970 to 9999).'),
          format: z.enum(['json', 'csv']).default('json'),
        }),
        response: { 200: z.union([z.object({ events: z.array(UsageEvent), next_cursor: z.string().nullable() }), z.string()]) },
      },
    },
    async (req, reply) => {
      const { limit, cursor, format, ...filters } = req.query;
      const page = await usage.events(requireSession(req).accountId, filters, limit, cursor);
      if (format === 'json') return page;
      if (page.next_cursor) reply.header('x-next-cursor', page.next_cursor);
      return reply.type('text/csv; charset=utf-8').header('content-disposition', 'attachment; filename="usage-events.csv"').send(usageCsv(page.events));
    },
  );

  r.get(
    '/v1/usage/stream',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: `SSE feed of new metering events (event: usage, id: seq, data: the event); resumes after Last-Event-ID, replaying at most ${REPLAY_MAX} events and naming the rest in one event: gap (after_seq, through_seq, missed, and the /v1/usage/events cursor that lists them)`,
        headers: z.object({ 'last-event-id': z.string().regex(/^\d{1,15}$/).optional() }),
        response: { 200: z.string().describe('text/event-stream') },
      },
    },
    async (req, reply) => {
      const accountId = requireSession(req).accountId;
      const sse = new SseStream(reply);
      const queue: Array<Parameters<Parameters<UsageStreams['subscribe']>[1]>[0]> = [];
      let lastSeq = Number(req.headers['last-event-id'] ?? -1);
      const emit = (e: (typeof queue)[number]) => {
        if (e.seq <= lastSeq) return;
        lastSeq = e.seq;
        sse.send(e, { event: 'usage', id: e.seq });
      };
      let replaying = lastSeq >= 0;
      const unsubscribe = streams.subscribe(accountId, (e) => (replaying ? queue.push(e) : emit(e)));
      sse.onClose(unsubscribe);
      if (replaying) {
        const { events, gap } = await streams.since(accountId, lastSeq);
        for (const e of events) emit(e);
        if (gap) {
          // Not replayed: named once, with where to read them; the stream goes on after them.
          lastSeq = gap.throughSeq;
          const cursor = deps.cursors.encode('usage_events', accountId, gap.throughSeq + 1);
          sse.send(
            { object: 'usage.gap', after_seq: gap.afterSeq, through_seq: gap.throughSeq, missed: gap.missed, cursor, events_url: `/v1/usage/events?cursor=${encodeURIComponent(cursor)}` },
            { event: 'gap', id: gap.throughSeq },
          );
        }
        replaying = false;
        queue.splice(0).forEach(emit);
      }
    },
  );

  r.post(
    '/v1/usage/statement',
    {
      config: { auth: 'session' },
      schema: {
        tags,
        summary: 'Signed spend statement for a period (at most 366 days)',
        body: z.object({ from: dateTime().describe('ISO 8601 date-time (1970 to 9999).'), to: dateTime().describe('ISO 8601 date-time (1970 to 9999).') }).strict(),
        response: { 200: z.object({ statement: z.record(z.string(), z.unknown()), ...Signed }) },
      },
    },
    async (req) => usage.statement(requireSession(req).accountId, req.body.from, req.body.to),
  );
}
