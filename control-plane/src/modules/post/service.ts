import type { Kysely } from 'kysely';
import { Sealer, ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { MarketConfig } from '../../config/market.ts';
import type { DB } from '../../db/schema.ts';
import type { Cursors } from '../../http/cursor.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { IdentityService } from '../identity/service.ts';
import type { Metering } from '../money/metering.ts';
import type { Transfers } from '../money/transfer.ts';
import type { PassportsService } from '../passports/service.ts';
import { accepts, type PostSettings } from './settings.ts';
import { boxPage, destroyContent, insertMessage, markRead, messageById, threadOf, unreadCount, type MessageRow } from './store.ts';

export const SEND_ROUTE = 'POST /v1/post/messages';
export const MAX_SUBJECT = 200;
export const MAX_BODY_BYTES = 64 * 1024;
export const PAGE_DEFAULT = 50;
export const PAGE_MAX = 200;

export interface PostDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  settings: PostSettings;
  metering: Metering;
  transfers: Transfers;
  cursors: Cursors;
  identity: Pick<IdentityService, 'lockAccount'>;
  passports: Pick<PassportsService, 'store'>;
  config: MarketConfig;
  publicUrl: URL;
}

export interface SendInput {
  to: string;
  subject?: string | undefined;
  body: string;
  in_reply_to?: string | undefined;
}

const subjectAad = (id: string) => `post_messages.subject:${id}`;
const bodyAad = (id: string) => `post_messages.body:${id}`;
const noMessage = () => notFound('Message');

/**
 * Agent Post: mail from one passport handle to another. The sender pays the recipient's postage: a metered
 * `post` usage event with a receipt of kind `post` on the sender's key, and the same amount credited to the
 * recipient's ledger with that event as reference, in the one transaction that stores the message (sealed).
 * Refusals answer before anything is charged or written: 402 when the sender cannot cover the postage, 403
 * when the recipient's policy refuses (one answer for every reason), 429 with Retry-After when the inbox is
 * full. Boxes list metadata only, newest first, with opaque cursors; opening, threads and deleting go to the
 * parties only (anyone else gets 404).
 */
export class PostService {
  private readonly sealer: Sealer;

  constructor(private readonly d: PostDeps) {
    this.sealer = new Sealer(d.sealKey);
  }

  private async handleOf(accountId: string): Promise<string | null> {
    return (await this.d.passports.store.handleOf(accountId))?.handle ?? null;
  }

  /** Whether a handle takes mail and at what postage; under an allow list or closed, `accepts: false` alike, postage hidden. */
  async lookup(handle: string) {
    const h = await this.d.passports.store.handle(handle.toLowerCase());
    if (!h) throw notFound('Handle');
    const s = await this.d.settings.get(h.account_id);
    const open = s.accept_policy === 'open';
    return { handle: h.handle, accepts: open, postage_micro_usd: open ? s.postage_micro_usd : null };
  }

  async send(p: KeyPrincipal, input: SendInput, requestId: string) {
    const subject = input.subject ?? '';
    if (subject.length > MAX_SUBJECT) throw invalid(`subject: at most ${MAX_SUBJECT} characters`, 'subject');
    const bytes = Buffer.byteLength(subject) + Buffer.byteLength(input.body);
    if (Buffer.byteLength(input.body) > MAX_BODY_BYTES) throw new ServiceError('payload_too_large', `body: at most ${MAX_BODY_BYTES} bytes`, { param: 'body' });
    const from = await this.handleOf(p.accountId);
    if (!from) throw new ServiceError('conflict', 'Mail goes from passport handle to passport handle: claim one for this account first (POST /v1/passport)', { reason: 'no_handle' });
    const to = await this.d.passports.store.handle(input.to.trim().toLowerCase());
    if (!to) throw notFound('Handle');
    if (to.account_id === p.accountId) throw invalid('to: mail to your own handle is refused', 'to');
    let threadId = newId('thr_');
    if (input.in_reply_to !== undefined) {
      const parent = await messageById(this.d.db, input.in_reply_to);
      if (!parent || !this.party(parent, p.accountId)) throw invalid('in_reply_to: no message of yours has this id', 'in_reply_to');
      threadId = parent.thread_id;
    }
    // Refusals before any money moves (checked again under the recipient's lock below).
    const settings = await this.d.settings.get(to.account_id);
    this.admit(settings, from, await unreadCount(this.d.db, to.account_id));
    const postage = settings.postage_micro_usd;
    const resource = new URL('/v1/post/messages', this.d.publicUrl).toString();
    const hold = await this.d.metering.hold({ principal: p, requestId, runId: null, maxCostMicroUsd: postage, route: SEND_ROUTE, resource, durable: true });
    const id = newId('msg_');
    const now = this.d.clock.now();
    const settled = await this.d.transfers.settleWith(
      hold,
      { costMicroUsd: postage, kind: 'post', units: { messages: 1, bytes }, detail: { message_id: id, thread_id: threadId, from_handle: from, to_handle: to.handle } },
      resource,
      async (trx, s) => {
        const current = await this.d.settings.get(to.account_id, trx);
        this.admit(current, from, await unreadCount(trx, to.account_id));
        if (current.postage_micro_usd !== postage) throw new ServiceError('conflict', 'The recipient changed its postage while this message was being sent; send it again', { reason: 'postage_changed' });
        if (postage > 0) await this.d.transfers.credit(trx, to.account_id, postage, 'post', s.usageEventId);
        await insertMessage(trx, {
          id,
          thread_id: threadId,
          in_reply_to: input.in_reply_to ?? null,
          sender_account_id: p.accountId,
          sender_handle: from,
          recipient_account_id: to.account_id,
          recipient_handle: to.handle,
          subject_sealed: this.sealer.seal(subject, subjectAad(id)),
          body_sealed: this.sealer.seal(input.body, bodyAad(id)),
          bytes,
          postage_micro_usd: postage,
          usage_event_id: s.usageEventId,
          receipt_id: requestId,
          sent_at: now,
          read_at: null,
          deleted_at: null,
        });
      },
      // Sends between accounts lock both, lower id first, before any ledger row: sends to one recipient are decided
      // one at a time (its policy and inbox count hold under concurrency) and two accounts mailing each other never deadlock.
      async (trx) => {
        for (const a of [p.accountId, to.account_id].sort()) await this.d.identity.lockAccount(trx, a);
      },
    );
    const row = (await messageById(this.d.db, id))!;
    return { message: { ...this.meta(row), usage_event_id: settled.usageEventId }, receipt: settled.receipt };
  }

  /** 403 when the recipient's policy refuses (the same answer whatever list or policy refused), 429 when its inbox is full. */
  private admit(s: Parameters<typeof accepts>[0], senderHandle: string, unread: number): void {
    if (!accepts(s, senderHandle)) throw new ServiceError('forbidden', 'The recipient does not accept mail from you; nothing was charged', { reason: 'recipient_policy' });
    if (unread >= this.d.config.postInboxMax) {
      throw new ServiceError('rate_limited', 'The recipient\'s inbox is full; nothing was charged, try again later', { reason: 'inbox_full', retry_after: this.d.config.postRetryAfterSeconds });
    }
  }

  private party(m: MessageRow, accountId: string): boolean {
    return m.sender_account_id === accountId || m.recipient_account_id === accountId;
  }

  async inbox(accountId: string, q: { limit?: number | undefined; cursor?: string | undefined }) {
    return { ...(await this.page('inbox', accountId, q)), unread: await unreadCount(this.d.db, accountId) };
  }

  outbox(accountId: string, q: { limit?: number | undefined; cursor?: string | undefined }) {
    return this.page('outbox', accountId, q);
  }

  private async page(box: 'inbox' | 'outbox', accountId: string, q: { limit?: number | undefined; cursor?: string | undefined }) {
    const limit = q.limit ?? PAGE_DEFAULT;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > PAGE_MAX) throw invalid(`limit: 1 to ${PAGE_MAX}`, 'limit');
    const route = `GET /v1/post/${box}`;
    const before = q.cursor === undefined ? null : this.d.cursors.decode(route, accountId, q.cursor);
    const rows = await boxPage(this.d.db, box, accountId, limit, before);
    const page = rows.slice(0, limit);
    const next = rows.length > limit ? this.d.cursors.encode(route, accountId, page.at(-1)!.seq) : null;
    return { messages: page.map((m) => this.meta(m)), next_cursor: next };
  }

  private async partyMessage(accountId: string, id: string): Promise<MessageRow> {
    const m = await messageById(this.d.db, id);
    if (!m || !this.party(m, accountId)) throw noMessage();
    return m;
  }

  async open(accountId: string, id: string) {
    return this.opened(await this.partyMessage(accountId, id));
  }

  async read(accountId: string, id: string) {
    const m = await this.partyMessage(accountId, id);
    if (m.recipient_account_id !== accountId) throw new ServiceError('forbidden', 'Only the recipient marks a message read', { reason: 'not_recipient' });
    await markRead(this.d.db, id, this.d.clock.now());
    return this.meta((await messageById(this.d.db, id))!);
  }

  /** Destroys a received message's content; the content-free row and its receipt stay. Idempotent. */
  async remove(accountId: string, id: string) {
    const m = await this.partyMessage(accountId, id);
    if (m.recipient_account_id !== accountId) throw new ServiceError('forbidden', 'Only the recipient deletes a message', { reason: 'not_recipient' });
    await destroyContent(this.d.db, id, this.d.clock.now());
    return this.meta((await messageById(this.d.db, id))!);
  }

  async thread(accountId: string, threadId: string) {
    const rows = await threadOf(this.d.db, threadId, accountId);
    if (rows.length === 0) throw notFound('Thread');
    return { messages: rows.map((m) => this.opened(m)), thread_id: threadId };
  }

  async getSettings(accountId: string) {
    return { handle: await this.handleOf(accountId), ...(await this.d.settings.get(accountId)), inbox: { unread: await unreadCount(this.d.db, accountId), max_unread: this.d.config.postInboxMax } };
  }

  async putSettings(accountId: string, input: Parameters<PostSettings['put']>[1]) {
    await this.d.settings.put(accountId, input);
    return this.getSettings(accountId);
  }

  meta(m: MessageRow) {
    return {
      id: m.id,
      thread_id: m.thread_id,
      in_reply_to: m.in_reply_to,
      from: m.sender_handle,
      to: m.recipient_handle,
      bytes: m.bytes,
      postage_micro_usd: m.postage_micro_usd,
      receipt_id: m.receipt_id,
      sent_at: m.sent_at.toISOString(),
      read_at: m.read_at?.toISOString() ?? null,
      deleted_at: m.deleted_at?.toISOString() ?? null,
    };
  }

  private opened(m: MessageRow) {
    return {
      ...this.meta(m),
      subject: m.subject_sealed ? this.sealer.open(m.subject_sealed, subjectAad(m.id)).toString('utf8') : null,
      body: m.body_sealed ? this.sealer.open(m.body_sealed, bodyAad(m.id)).toString('utf8') : null,
    };
  }
}
