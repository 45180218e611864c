import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { invalid } from '@svc/shared';
import { requireKey } from '../../http/auth.ts';
import type { Agents } from './create.ts';
import { MAILBOX_PAGE, MAILBOX_UNREAD_CAP, MAX_MESSAGE_BYTES } from './mailbox.ts';
import { IdParams, MessageBody, MessageDelivered, MessagesList, MessagesQuery } from './schemas.ts';

/** Agent mailboxes (API key of the account). */
export function agentMessageRoutes(app: FastifyInstance, agents: Agents): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['agents'];
  const config = { auth: 'key' as const, scope: 'agents' as const };

  r.post(
    '/v1/agents/:id/messages',
    {
      config,
      schema: {
        tags,
        summary: `Deliver a message (content, at most ${MAX_MESSAGE_BYTES} bytes; sealed at rest) to one of the account's agents; with its mailbox trigger on, a run is queued with the message as SVC_INPUT. At most ${MAILBOX_UNREAD_CAP} unread per mailbox (409 mailbox_full)`,
        params: IdParams,
        body: MessageBody,
        response: { 201: MessageDelivered },
      },
    },
    async (req, reply) => {
      const b = req.body;
      if ((b.content === undefined) === (b.body === undefined)) throw invalid('content: give the message as content (or body), once', 'content');
      return reply.code(201).send(await agents.mailboxes.deliver(requireKey(req), req.params.id, (b.content ?? b.body)!, b.from_agent_id));
    },
  );

  r.get(
    '/v1/agents/:id/messages',
    {
      config,
      schema: {
        tags,
        summary: `Read a mailbox, oldest first, ${MAILBOX_PAGE} at most; ?consume=true marks them read; ?unread_only=true leaves read ones out`,
        params: IdParams,
        querystring: MessagesQuery,
        response: { 200: MessagesList },
      },
    },
    async (req) => agents.mailboxes.read(requireKey(req).accountId, req.params.id, { consume: req.query.consume ?? false, unreadOnly: req.query.unread_only ?? false }),
  );
}
