import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcClient } from '@svc/shared/client';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { expectApiError } from './support/expect-error.ts';

/**
 * Agent Post end to end: mail between passports over HTTP with API keys (scope post), postage paid by the
 * sender as a metered `post` usage event (receipt kind `post`) and credited to the recipient's ledger in the
 * same transaction; every refusal (402, 403, 429, 400) with its body and nothing charged or written.
 */
const INBOX_MAX = 4;
let t: TestGateway;

interface Party {
  handle: string;
  accountId: string;
  session: SvcClient;
  key: SvcClient;
}
const parties: Record<string, Party> = {};

async function party(handle: string, credit: number): Promise<Party> {
  const s = await t.signIn();
  await s.client.request('POST', '/v1/passport', { body: { handle } });
  if (credit > 0) await t.gw.services.metering.credit(s.accountId, credit, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['post'] as never });
  const p = { handle, accountId: s.accountId, session: s.client, key: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
  parties[handle] = p;
  return p;
}

const send = (from: Party, body: Record<string, unknown>) => from.key.request<any>('POST', '/v1/post/messages', { body });
const balance = async (p: Party) => (await p.session.request<any>('GET', '/v1/billing/balance')).balance_micro_usd as number;
const ledger = async (p: Party) => (await p.session.request<any>('GET', '/v1/billing/ledger')).entries as Array<{ kind: string; amount_micro_usd: number; ref: string | null }>;

beforeAll(async () => {
  t = await startTestGateway({ env: { ...ENFORCED_BILLING, SVC_POST_INBOX_MAX: String(INBOX_MAX), SVC_POST_RETRY_AFTER_SECONDS: '120' } });
  await party('alice-agent', 2_000_000);
  await party('bob-agent', 0);
  await party('carol-agent', 0);
  await party('dave-agent', 5_000_000);
}, 120_000);
afterAll(async () => t?.close());

describe('settings and the public handle lookup', () => {
  it('answers whether a handle takes mail and at what postage; unknown handles 404', async () => {
    expect(await (await fetch(`${t.url}/v1/post/handles/bob-agent`)).json()).toEqual({ handle: 'bob-agent', accepts: true, postage_micro_usd: 0 });
    const unknown = await fetch(`${t.url}/v1/post/handles/nobody-here`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as any).error.type).toBe('not_found');
  });

  it('caps postage at $1.00 and checks list handles, naming the field', async () => {
    const bob = parties['bob-agent']!;
    expect((await expectApiError(bob.key.request('PUT', '/v1/post/settings', { body: { postage_micro_usd: 1_000_001 } }), 400, 'invalid_request')).param).toBe('postage_micro_usd');
    expect((await expectApiError(bob.key.request('PUT', '/v1/post/settings', { body: { block_list: ['ok-handle', 'Not A Handle'] } }), 400, 'invalid_request')).param).toBe('block_list[1]');
    const s = await bob.key.request<any>('PUT', '/v1/post/settings', { body: { postage_micro_usd: 250_000 } });
    expect(s).toMatchObject({ handle: 'bob-agent', postage_micro_usd: 250_000, accept_policy: 'open', allow_list: [], block_list: [], inbox: { unread: 0, max_unread: INBOX_MAX } });
    expect(await (await fetch(`${t.url}/v1/post/handles/bob-agent`)).json()).toEqual({ handle: 'bob-agent', accepts: true, postage_micro_usd: 250_000 });
  });
});

describe('sending', () => {
  let first: any;

  it('moves the postage from the sender to the recipient through their ledgers, with a post receipt', async () => {
    const alice = parties['alice-agent']!;
    const bob = parties['bob-agent']!;
    first = await send(alice, { to: 'bob-agent', subject: 'Quote', body: 'Can you translate 10 pages by Friday?' });
    expect(first).toMatchObject({ from: 'alice-agent', to: 'bob-agent', postage_micro_usd: 250_000, read_at: null, deleted_at: null });
    expect(first.id).toMatch(/^msg_/);
    expect(first.thread_id).toMatch(/^thr_/);
    expect(await balance(alice)).toBe(1_750_000);
    expect(await balance(bob)).toBe(250_000);
    const bobPost = (await ledger(bob)).filter((e) => e.kind === 'post');
    expect(bobPost).toEqual([expect.objectContaining({ amount_micro_usd: 250_000, ref: first.usage_event_id })]);
    const events = await alice.session.request<any>('GET', '/v1/usage/events', { query: { kind: 'post' } });
    expect(events.events).toEqual([expect.objectContaining({ id: first.usage_event_id, kind: 'post', cost_micro_usd: 250_000 })]);
    const receipt = await alice.session.request<any>('GET', `/v1/receipts/${first.receipt_id}`);
    expect(JSON.stringify(receipt)).toContain('"kind":"post"');
  });

  it('lists metadata only in inbox and outbox; opens for the parties only; marks read; threads replies', async () => {
    const [alice, bob, carol] = [parties['alice-agent']!, parties['bob-agent']!, parties['carol-agent']!];
    const inbox = await bob.key.request<any>('GET', '/v1/post/inbox');
    expect(inbox).toMatchObject({ next_cursor: null, unread: 1 });
    expect(inbox.messages).toHaveLength(1);
    expect(JSON.stringify(inbox)).not.toContain('translate');
    expect(inbox.messages[0]).not.toHaveProperty('body');
    const outbox = await alice.key.request<any>('GET', '/v1/post/outbox');
    expect(outbox).toEqual({ messages: [expect.objectContaining({ id: first.id })], next_cursor: null });
    const opened = await bob.key.request<any>('GET', `/v1/post/messages/${first.id}`);
    expect(opened).toMatchObject({ subject: 'Quote', body: 'Can you translate 10 pages by Friday?' });
    expect((await alice.key.request<any>('GET', `/v1/post/messages/${first.id}`)).body).toBe('Can you translate 10 pages by Friday?');
    await expectApiError(carol.key.request('GET', `/v1/post/messages/${first.id}`), 404, 'not_found');
    await expectApiError(alice.key.request('POST', `/v1/post/messages/${first.id}/read`), 403, 'forbidden');
    expect((await bob.key.request<any>('POST', `/v1/post/messages/${first.id}/read`)).read_at).not.toBeNull();
    expect((await bob.key.request<any>('GET', '/v1/post/inbox')).unread).toBe(0);
    const reply = await send(bob, { to: 'alice-agent', body: 'Yes, by Thursday.', in_reply_to: first.id });
    expect(reply).toMatchObject({ thread_id: first.thread_id, in_reply_to: first.id, postage_micro_usd: 0 });
    const thread = await alice.key.request<any>('GET', `/v1/post/threads/${first.thread_id}`);
    expect(thread.thread_id).toBe(first.thread_id);
    expect(thread.messages.map((m: any) => m.body)).toEqual(['Can you translate 10 pages by Friday?', 'Yes, by Thursday.']);
    await expectApiError(carol.key.request('GET', `/v1/post/threads/${first.thread_id}`), 404, 'not_found');
    expect((await expectApiError(send(carol, { to: 'bob-agent', body: 'x', in_reply_to: first.id }), 400, 'invalid_request')).param).toBe('in_reply_to');
  });

  it('402 when the sender cannot cover the postage, with payment terms; nothing charged or written', async () => {
    const carol = parties['carol-agent']!;
    const bob = parties['bob-agent']!;
    const e = await expectApiError(send(carol, { to: 'bob-agent', body: 'hello' }), 402, 'insufficient_credit');
    expect(e.body!.error).toMatchObject({ x402Version: 1, required_micro_usd: 250_000 });
    expect((e.body!.error as any).accepts[0]).toMatchObject({ scheme: 'exact', payTo: ENFORCED_BILLING.SVC_TREASURY_ADDRESS });
    expect((await carol.key.request<any>('GET', '/v1/post/outbox')).messages).toEqual([]);
    expect((await bob.key.request<any>('GET', '/v1/post/inbox')).messages).toHaveLength(1);
    expect(await balance(bob)).toBe(250_000);
    expect(await balance(carol)).toBe(0);
  });

  it('403 when the recipient refuses: block list, allow list, closed; one answer for each, nothing charged', async () => {
    const [alice, bob] = [parties['alice-agent']!, parties['bob-agent']!];
    const before = await balance(alice);
    await bob.key.request('PUT', '/v1/post/settings', { body: { block_list: ['alice-agent'] } });
    const blocked = await expectApiError(send(alice, { to: 'bob-agent', body: 'again' }), 403, 'forbidden');
    expect(blocked.body!.error.reason).toBe('recipient_policy');
    await bob.key.request('PUT', '/v1/post/settings', { body: { block_list: [], accept_policy: 'allowlist', allow_list: ['dave-agent'] } });
    const notAllowed = await expectApiError(send(alice, { to: 'bob-agent', body: 'again' }), 403, 'forbidden');
    expect(notAllowed.body!.error).toEqual({ ...blocked.body!.error, request_id: notAllowed.body!.error.request_id });
    expect(await (await fetch(`${t.url}/v1/post/handles/bob-agent`)).json()).toEqual({ handle: 'bob-agent', accepts: false, postage_micro_usd: null });
    await bob.key.request('PUT', '/v1/post/settings', { body: { accept_policy: 'closed' } });
    expect(await (await fetch(`${t.url}/v1/post/handles/bob-agent`)).json()).toEqual({ handle: 'bob-agent', accepts: false, postage_micro_usd: null });
    await expectApiError(send(alice, { to: 'bob-agent', body: 'again' }), 403, 'forbidden');
    expect(await balance(alice)).toBe(before);
    // The allowed sender gets through the allow list.
    await bob.key.request('PUT', '/v1/post/settings', { body: { accept_policy: 'allowlist' } });
    expect((await send(parties['dave-agent']!, { to: 'bob-agent', body: 'from dave' })).postage_micro_usd).toBe(250_000);
    await bob.key.request('PUT', '/v1/post/settings', { body: { accept_policy: 'open', allow_list: [] } });
  });

  it('429 with Retry-After when the inbox is full; nothing charged', async () => {
    const [alice, dave, bob] = [parties['alice-agent']!, parties['dave-agent']!, parties['bob-agent']!];
    const unread = (await bob.key.request<any>('GET', '/v1/post/inbox')).unread as number;
    for (let i = unread; i < INBOX_MAX; i++) await send(dave, { to: 'bob-agent', body: `filler ${i}` });
    const before = await balance(alice);
    const e = await expectApiError(send(alice, { to: 'bob-agent', body: 'one too many' }), 429, 'rate_limited');
    expect(e.body!.error.reason).toBe('inbox_full');
    expect(e.headers.get('retry-after')).toBe('120');
    expect(await balance(alice)).toBe(before);
    // Reading one makes room.
    const inbox = await bob.key.request<any>('GET', '/v1/post/inbox');
    const unreadOne = inbox.messages.find((m: any) => m.read_at === null);
    await bob.key.request('POST', `/v1/post/messages/${unreadOne.id}/read`);
    expect((await send(alice, { to: 'bob-agent', body: 'now it fits' })).to).toBe('bob-agent');
  });

  it('refuses mail to oneself and unknown handles', async () => {
    const alice = parties['alice-agent']!;
    expect((await expectApiError(send(alice, { to: 'alice-agent', body: 'me' }), 400, 'invalid_request')).param).toBe('to');
    await expectApiError(send(alice, { to: 'nobody-here', body: 'x' }), 404, 'not_found');
  });

  it('moves exactly what it charges under concurrent sends', async () => {
    const [dave, carol] = [parties['dave-agent']!, parties['carol-agent']!];
    await carol.key.request('PUT', '/v1/post/settings', { body: { postage_micro_usd: 70_000 } });
    const daveBefore = await balance(dave);
    const results = await Promise.allSettled(Array.from({ length: INBOX_MAX + 3 }, (_, i) => send(dave, { to: 'carol-agent', body: `parallel ${i}` })));
    const ok = results.filter((r) => r.status === 'fulfilled').length;
    expect(ok).toBe(INBOX_MAX);
    const bad = results.filter((r) => r.status === 'rejected' && (r as PromiseRejectedResult).reason.status !== 429).map((r) => { const e = (r as PromiseRejectedResult).reason; return `${e.status} ${JSON.stringify(e.body ?? String(e))}`; });
    expect(bad).toEqual([]);
    expect(await balance(carol)).toBe(ok * 70_000);
    expect(await balance(dave)).toBe(daveBefore - ok * 70_000);
    expect((await carol.key.request<any>('GET', '/v1/post/inbox', { query: { limit: 200 } })).messages).toHaveLength(ok);
  });
});

describe('boxes and deletion', () => {
  it('pages with opaque cursors bound to their route', async () => {
    const carol = parties['carol-agent']!;
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await carol.key.request('GET', '/v1/post/inbox', { query: { limit: 3, ...(cursor ? { cursor } : {}) } });
      seen.push(...page.messages.map((m: any) => m.id));
      expect(page.messages.length).toBeLessThanOrEqual(3);
      cursor = page.next_cursor;
      if (cursor) {
        const wrong = await expectApiError(carol.key.request('GET', '/v1/post/outbox', { query: { cursor } }), 400, 'invalid_cursor');
        expect(wrong.param).toBe('cursor');
      }
    } while (cursor);
    expect(new Set(seen).size).toBe(INBOX_MAX);
    await expectApiError(carol.key.request('GET', '/v1/post/inbox', { query: { limit: 0 } }), 400, 'invalid_request');
    await expectApiError(carol.key.request('GET', '/v1/post/inbox', { query: { limit: 201 } }), 400, 'invalid_request');
  });

  it('deleting destroys the content; the content-free row and its receipt remain', async () => {
    const [alice, bob] = [parties['alice-agent']!, parties['bob-agent']!];
    const inbox = await bob.key.request<any>('GET', '/v1/post/inbox', { query: { limit: 200 } });
    const m = inbox.messages.find((x: any) => x.from === 'alice-agent');
    await expectApiError(alice.key.request('DELETE', `/v1/post/messages/${m.id}`), 403, 'forbidden');
    const d = await bob.key.request<any>('DELETE', `/v1/post/messages/${m.id}`);
    expect(d.deleted_at).not.toBeNull();
    const opened = await alice.key.request<any>('GET', `/v1/post/messages/${m.id}`);
    expect(opened).toMatchObject({ id: m.id, subject: null, body: null, postage_micro_usd: m.postage_micro_usd, receipt_id: m.receipt_id });
    expect(JSON.stringify(await alice.session.request<any>('GET', `/v1/receipts/${m.receipt_id}`))).toContain('"kind":"post"');
    const raw = await t.gw.database.db.selectFrom('post_messages').select(['subject_sealed', 'body_sealed']).where('id', '=', m.id).executeTakeFirstOrThrow();
    expect(raw).toEqual({ subject_sealed: null, body_sealed: null });
  });
});
