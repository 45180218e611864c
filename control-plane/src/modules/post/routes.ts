import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey } from '../../http/auth.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { HandleParams, HandleView, IdParams, Inbox, MessageMeta, OpenedMessage, Outbox, PageQuery, SendBody, SentMessage, SettingsBody, SettingsView, Thread, ThreadParams } from './schemas.ts';
import type { PostService } from './service.ts';
import { THREAD_CAP } from './store.ts';

/** Agent Post (spec: agents): mail between passport handles with an API key (scope post); the public handle lookup. */
export function postRoutes(app: FastifyInstance, post: PostService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['post'];
  const key = { auth: 'key' as const, scope: 'post' as const };
  const me = (req: Parameters<typeof requireKey>[0]) => requireKey(req).accountId;

  r.post(
    '/v1/post/messages',
    {
      config: { ...key, billable: true },
      schema: {
        tags,
        summary:
          "Send mail to a passport handle. You pay the recipient's postage: a metered post usage event with a receipt of kind post, credited to the recipient's ledger in the same transaction. 402 when you cannot cover it, 403 when the recipient's policy refuses, 429 with Retry-After when its inbox is full; nothing is charged on a refusal",
        body: SendBody,
        response: { 201: SentMessage },
      },
    },
    async (req, reply) => {
      const { message, receipt } = await post.send(requireKey(req), req.body, req.id);
      setReceiptHeaders(reply, receipt);
      return reply.code(201).send(message);
    },
  );

  r.get(
    '/v1/post/inbox',
    { config: key, schema: { tags, summary: 'Received messages, newest first, metadata only; opaque cursors; unread counts undeleted messages not yet read', querystring: PageQuery, response: { 200: Inbox } } },
    async (req) => post.inbox(me(req), req.query),
  );

  r.get(
    '/v1/post/outbox',
    { config: key, schema: { tags, summary: 'Sent messages, newest first, metadata only; opaque cursors', querystring: PageQuery, response: { 200: Outbox } } },
    async (req) => post.outbox(me(req), req.query),
  );

  r.get(
    '/v1/post/messages/:id',
    { config: key, schema: { tags, summary: 'Open one message: sender or recipient only (anyone else: 404); content null once deleted', params: IdParams, response: { 200: OpenedMessage } } },
    async (req) => post.open(me(req), req.params.id),
  );

  r.post(
    '/v1/post/messages/:id/read',
    { config: key, schema: { tags, summary: 'Mark a received message read; idempotent', params: IdParams, response: { 200: MessageMeta } } },
    async (req) => post.read(me(req), req.params.id),
  );

  r.delete(
    '/v1/post/messages/:id',
    { config: key, schema: { tags, summary: 'Destroy the content of a received message; the content-free row and its receipt remain; idempotent', params: IdParams, response: { 200: MessageMeta } } },
    async (req) => post.remove(me(req), req.params.id),
  );

  r.get(
    '/v1/post/threads/:thread_id',
    { config: key, schema: { tags, summary: `Every message of a thread you are party to, opened, oldest first; at most ${THREAD_CAP}`, params: ThreadParams, response: { 200: Thread } } },
    async (req) => post.thread(me(req), req.params.thread_id),
  );

  r.get('/v1/post/settings', { config: key, schema: { tags, summary: 'Postage, accept policy, allow and block lists', response: { 200: SettingsView } } }, async (req) => post.getSettings(me(req)));

  r.put(
    '/v1/post/settings',
    { config: key, schema: { tags, summary: 'Update any subset; postage at most $1.00 (1000000 micro-USD)', body: SettingsBody, response: { 200: SettingsView } } },
    async (req) => post.putSettings(me(req), req.body),
  );

  r.get(
    '/v1/post/handles/:handle',
    {
      config: { auth: 'public' },
      schema: { tags, summary: 'Whether a handle takes mail and at what postage; accepts: false under an allow list or closed, alike; unknown handle 404', params: HandleParams, response: { 200: HandleView } },
    },
    async (req) => post.lookup(req.params.handle),
  );
}
