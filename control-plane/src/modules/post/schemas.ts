import { z } from 'zod';
import { utf8Text, withoutNul } from '../../http/fields.ts';
import { MAX_BODY_BYTES, MAX_SUBJECT, PAGE_DEFAULT, PAGE_MAX } from './service.ts';
import { ACCEPT_POLICIES, MAX_LIST, MAX_POSTAGE_MICRO_USD } from './settings.ts';

export const IdParams = z.object({ id: z.string().max(64) });
export const ThreadParams = z.object({ thread_id: z.string().max(64) });
export const HandleParams = z.object({ handle: z.string().max(64) });

export const SendBody = z
  .object({
    to: z.string().max(64).describe('The recipient\'s passport handle.'),
    subject: withoutNul(z.string().max(MAX_SUBJECT)).optional(),
    body: withoutNul(utf8Text(MAX_BODY_BYTES)).describe(`At most ${MAX_BODY_BYTES} bytes of UTF-8 (413 above); sealed at rest.`),
    in_reply_to: z.string().max(64).optional().describe('A message of yours (sent or received): the reply joins its thread.'),
  })
  .strict();

export const PageQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(PAGE_MAX).optional().describe(`1-${PAGE_MAX}, default ${PAGE_DEFAULT}.`),
    cursor: z.string().max(512).optional().describe('The next_cursor of the previous page, verbatim.'),
  })
  .strict();

export const MessageMeta = z.object({
  id: z.string(),
  thread_id: z.string(),
  in_reply_to: z.string().nullable(),
  from: z.string(),
  to: z.string(),
  bytes: z.number(),
  postage_micro_usd: z.number(),
  receipt_id: z.string(),
  sent_at: z.string(),
  read_at: z.string().nullable(),
  deleted_at: z.string().nullable(),
});

export const OpenedMessage = MessageMeta.extend({ subject: z.string().nullable(), body: z.string().nullable().describe('Null once the recipient deleted the message.') });
export const SentMessage = MessageMeta.extend({ usage_event_id: z.string() });

export const Inbox = z.object({ messages: z.array(MessageMeta), next_cursor: z.string().nullable(), unread: z.number() });
export const Outbox = z.object({ messages: z.array(MessageMeta), next_cursor: z.string().nullable() });
export const Thread = z.object({ messages: z.array(OpenedMessage), thread_id: z.string() });

const Handles = z.array(z.string().max(64)).max(MAX_LIST);

export const SettingsBody = z
  .object({
    postage_micro_usd: z.number().int().optional().describe(`What a sender pays you per message, micro-USD; at most ${MAX_POSTAGE_MICRO_USD} ($1.00).`),
    accept_policy: z.enum(ACCEPT_POLICIES).optional().describe('open: anyone not blocked; allowlist: only handles on the allow list; closed: nobody.'),
    allow_list: Handles.optional(),
    block_list: Handles.optional(),
  })
  .strict();

export const SettingsView = z.object({
  handle: z.string().nullable(),
  postage_micro_usd: z.number(),
  accept_policy: z.enum(ACCEPT_POLICIES),
  allow_list: z.array(z.string()),
  block_list: z.array(z.string()),
  inbox: z.object({ unread: z.number(), max_unread: z.number() }),
});

export const HandleView = z.object({ handle: z.string(), accepts: z.boolean(), postage_micro_usd: z.number().nullable() });
