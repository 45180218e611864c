import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { recoverMessageAddress } from 'viem';
import { SvcClient } from '@svc/shared/client';
import { startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';

const PRICE = 2_500;
let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ env: { SVC_NOTARY_PRICE_MICRO_USD: String(PRICE) } });
});
afterAll(async () => t?.close());

const digest = (n: number) => n.toString(16).padStart(64, '0');
const asKey = (base: string, secret: string) => new SvcClient({ baseUrl: base, credential: { kind: 'key', token: secret } });
async function notarize(api: SvcClient, n: number) {
  const res = await api.raw('POST', '/v1/notary/receipts', { body: { input_sha256: digest(n), output_sha256: digest(n) } });
  expect(res.status).toBe(201);
  return res.headers.get('x-request-id')!;
}

async function account(grants: number[]) {
  const s = await t.signIn();
  for (const [i, g] of grants.entries()) await t.gw.services.metering.credit(s.accountId, g, 'grant', `g-${s.accountId}-${i}`);
  const k = await s.client.createKey();
  return { ...s, api: asKey(t.url, k.key) };
}

describe('credit position', () => {
  it('key and session views agree', async () => {
    const a = await account([100_000]);
    await notarize(a.api, 1);
    const viaKey = await a.api.request('GET', '/v1/credit');
    const viaSession = await a.client.request('GET', '/v1/billing/balance');
    // The notary call was admitted from a credit lease of 64 requests' worth; its cost came out of it.
    expect(viaKey).toEqual({ balance_micro_usd: 100_000 - PRICE, held_micro_usd: 0, leased_micro_usd: 63 * PRICE, spendable_micro_usd: 100_000 - PRICE, billing_enforced: false });
    expect(viaSession).toEqual(viaKey);
  });
});

describe('ledger pagination', () => {
  it('walks every entry exactly once, newest first, with has_more', async () => {
    const a = await account(Array.from({ length: 7 }, (_, i) => (i + 1) * 1000));
    for (let i = 0; i < 5; i++) await notarize(a.api, i);
    const seen: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await a.client.request<{ entries: Array<{ id: number; amount_micro_usd: number; balance_after_micro_usd: number }>; has_more: boolean; next_cursor: string | null }>(
        'GET',
        '/v1/billing/ledger',
        { query: { limit: 5, cursor } },
      );
      pages++;
      seen.push(...page.entries.map((e) => e.id));
      expect(page.has_more).toBe(page.next_cursor !== null);
      if (!page.has_more) break;
      cursor = page.next_cursor!;
    }
    expect(pages).toBe(3);
    expect(seen).toHaveLength(12);
    expect(new Set(seen).size).toBe(12);
    expect([...seen].sort((x, y) => y - x)).toEqual(seen);
    const all = await a.client.request<{ entries: Array<{ amount_micro_usd: number; balance_after_micro_usd: number }> }>('GET', '/v1/billing/ledger');
    expect(all.entries[0]!.balance_after_micro_usd).toBe(28_000 - 5 * PRICE);
    expect(all.entries.reduce((s, e) => s + e.amount_micro_usd, 0)).toBe(28_000 - 5 * PRICE);
  });

  it('answers 400 for an unparseable cursor, a tampered one, or one from another account or route', async () => {
    const a = await account([1000, 2000]);
    const b = await account([1000, 2000]);
    const page = await a.client.request<{ next_cursor: string }>('GET', '/v1/billing/ledger', { query: { limit: 1 } });
    expect(page.next_cursor).toBeTruthy();
    for (const cursor of ['garbage', `${page.next_cursor}x`, page.next_cursor.replace(/^./, 'A')]) {
      const e = await expectApiError(a.client.request('GET', '/v1/billing/ledger', { query: { cursor } }), 400, 'invalid_cursor');
      expect(e.param).toBe('cursor');
    }
    await expectApiError(b.client.request('GET', '/v1/billing/ledger', { query: { cursor: page.next_cursor } }), 400, 'invalid_cursor');
    await expectApiError(a.client.request('GET', '/v1/usage/events', { query: { cursor: page.next_cursor } }), 400, 'invalid_cursor');
    await expectApiError(a.client.request('GET', '/v1/billing/ledger', { query: { limit: 0 } }), 400, 'invalid_request');
    await expectApiError(a.client.request('GET', '/v1/billing/ledger', { query: { limit: 1001 } }), 400, 'invalid_request');
  });
});

describe('usage', () => {
  it('summarises totals, latest events and 14 daily buckets', async () => {
    const a = await account([]);
    await notarize(a.api, 1);
    t.clock.advance(86_400_000);
    await notarize(a.api, 2);
    await notarize(a.api, 3);
    const u = await a.client.request<{ totals: { events: number; cost_micro_usd: number; by_kind: unknown[] }; events: unknown[]; daily: Array<{ date: string; events: number }> }>('GET', '/v1/usage');
    expect(u.totals).toEqual({ events: 3, cost_micro_usd: 3 * PRICE, by_kind: [{ kind: 'notary', events: 3, cost_micro_usd: 3 * PRICE }] });
    expect(u.events).toHaveLength(3);
    expect(u.daily).toHaveLength(14);
    expect(u.daily.at(-1)).toEqual({ date: t.clock.now().toISOString().slice(0, 10), events: 2, cost_micro_usd: 2 * PRICE });
    expect(u.daily.at(-2)?.events).toBe(1);
  });

  it('sums the 14 days of the daily buckets by model and by key, and filters events by model and by route', async () => {
    const a = await account([]);
    const second = asKey(t.url, (await a.client.createKey({ name: 'second' })).key);
    await notarize(a.api, 1);
    t.clock.advance(15 * 86_400_000); // the first call falls out of the 14 days
    await notarize(a.api, 2);
    await notarize(a.api, 3);
    await notarize(second, 4);
    const keys = await a.client.request<Array<{ id: string; name: string | null }>>('GET', '/v1/keys');
    const secondId = keys.find((k) => k.name === 'second')!.id;
    const firstId = keys.find((k) => k.id !== secondId)!.id;
    const u = await a.client.request<{ by_model: unknown[]; by_key: unknown[]; daily: Array<{ cost_micro_usd: number }> }>('GET', '/v1/usage');
    expect(u.by_model).toEqual([{ model: null, events: 3, cost_micro_usd: 3 * PRICE }]);
    expect(u.by_key).toEqual([
      { key_id: firstId, events: 2, cost_micro_usd: 2 * PRICE },
      { key_id: secondId, events: 1, cost_micro_usd: PRICE },
    ]);
    expect(u.daily.reduce((s, d) => s + d.cost_micro_usd, 0)).toBe(3 * PRICE);
    const events = (query: Record<string, string>) => a.client.request<{ events: Array<{ route: string }> }>('GET', '/v1/usage/events', { query });
    const all = await events({});
    expect(all.events).toHaveLength(4);
    expect((await events({ route: all.events[0]!.route })).events).toHaveLength(4);
    expect((await events({ route: 'POST /v1/chat/completions' })).events).toEqual([]);
    expect((await events({ model: 'test-chat' })).events).toEqual([]);
    await expectApiError(a.client.request('GET', '/v1/usage/events', { query: { model: 'm'.repeat(201) } }), 400, 'invalid_request');
  });

  it('pages events with filters and exports CSV', async () => {
    const a = await account([]);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await notarize(a.api, i));
    const p1 = await a.client.request<{ events: Array<{ request_id: string }>; next_cursor: string | null }>('GET', '/v1/usage/events', { query: { limit: 3 } });
    const p2 = await a.client.request<{ events: Array<{ request_id: string }>; next_cursor: string | null }>('GET', '/v1/usage/events', { query: { limit: 3, cursor: p1.next_cursor! } });
    expect([...p1.events, ...p2.events].map((e) => e.request_id)).toEqual([...ids].reverse());
    expect(p2.next_cursor).toBeNull();
    const none = await a.client.request<{ events: unknown[] }>('GET', '/v1/usage/events', { query: { kind: 'sandbox' } });
    expect(none.events).toEqual([]);
    const res = await a.client.raw('GET', '/v1/usage/events', { query: { format: 'csv', limit: 2 } });
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('x-next-cursor')).toBeTruthy();
    const lines = (await res.text()).trim().split('\r\n');
    expect(lines[0]).toBe('id,created_at,kind,route,model,key_id,run_id,request_id,receipt_id,cost_micro_usd,units');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toContain(`"${ids[4]}"`);
    expect(lines[1]).toContain(`"${PRICE}"`);
    await expectApiError(a.client.request('GET', '/v1/usage/events', { query: { since: 'yesterday' } }), 400, 'invalid_request');
  });

  it('signs a spend statement for a period; a period that ends before it starts is refused', async () => {
    const a = await account([50_000]);
    t.clock.advance(1000);
    const from = new Date(t.clock.now().getTime() - 500).toISOString();
    await notarize(a.api, 1);
    await notarize(a.api, 2);
    const to = new Date(t.clock.now().getTime() + 1000).toISOString();
    const s = await a.client.request<{ statement: any; signature: `0x${string}`; signer: string; canonical: string }>('POST', '/v1/usage/statement', { body: { from, to } });
    expect(s.statement.usage).toMatchObject({ events: 2, cost_micro_usd: 2 * PRICE });
    expect(s.statement.ledger).toMatchObject({ opening_balance_micro_usd: 50_000, closing_balance_micro_usd: 50_000 - 2 * PRICE, debits_micro_usd: 2 * PRICE });
    expect(await recoverMessageAddress({ message: s.canonical, signature: s.signature })).toBe(s.signer);
    expect(JSON.parse(s.canonical)).toEqual(s.statement);
    const e = await expectApiError(a.client.request('POST', '/v1/usage/statement', { body: { from: to, to: from } }), 400, 'invalid_request');
    expect(e.param).toBe('to');
  });
});

type Frame = { event: string; id: string; data: any };

/** Reads SSE frames of a response as they come: `next(n)` answers the next n frames (fewer if it ends). */
function sseFrames(res: Response) {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const ready: Frame[] = [];
  return {
    async next(count: number): Promise<Frame[]> {
      while (ready.length < count) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const f: Record<string, string> = {};
          for (const line of frame.split('\n')) {
            const m = /^(\w+): (.*)$/.exec(line);
            if (m) f[m[1]!] = m[2]!;
          }
          if (f.data) ready.push({ event: f.event ?? 'message', id: f.id ?? '', data: JSON.parse(f.data) });
        }
      }
      return ready.splice(0, count);
    },
    close: () => reader.cancel(),
  };
}

async function readEvents(res: Response, count: number): Promise<Frame[]> {
  const frames = sseFrames(res);
  const out = await frames.next(count);
  await frames.close();
  return out;
}

describe('usage stream', () => {
  it('delivers a new metering event over SSE, and resumes after Last-Event-ID', async () => {
    const a = await account([]);
    const res = await fetch(`${t.url}/v1/usage/stream`, { headers: { authorization: `Bearer ${a.token}` } });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const pending = readEvents(res, 2);
    const r1 = await notarize(a.api, 1);
    const r2 = await notarize(a.api, 2);
    const events = await pending;
    expect(events.map((e) => [e.event, e.data.request_id])).toEqual([
      ['usage', r1],
      ['usage', r2],
    ]);
    const resumed = await fetch(`${t.url}/v1/usage/stream`, { headers: { authorization: `Bearer ${a.token}`, 'last-event-id': events[0]!.id } });
    const again = await readEvents(resumed, 1);
    expect(again[0]!.data.request_id).toBe(r2);
  });

  it('a resume that missed more than it replays names the gap and the /v1/usage/events cursor that lists it', async () => {
    const a = await account([]);
    await notarize(a.api, 1);
    const [first] = (await a.client.request<{ events: Array<{ seq: number }> }>('GET', '/v1/usage/events')).events;
    // 1,838 events the client missed since its Last-Event-ID, more than one resume replays (1,000).
    await sql`
      insert into usage_events (id, account_id, key_id, request_id, kind, route, model, units, cost_micro_usd, run_id, receipt_id, created_at)
      select 'evt_gap' || i, ${a.accountId}, null, 'req_gap' || i, 'notary', 'POST /v1/notary/receipts', null, '{}'::jsonb, 1, null, 'req_gap' || i, ${t.clock.now()}
      from generate_series(1, 1838) as i order by i`.execute(t.gw.database.db);
    const res = await fetch(`${t.url}/v1/usage/stream`, { headers: { authorization: `Bearer ${a.token}`, 'last-event-id': String(first!.seq) } });
    const stream = sseFrames(res);
    const frames = await stream.next(1000);
    const live = await notarize(a.api, 2);
    frames.push(...(await stream.next(1)));
    expect(frames.slice(0, 1000).every((f) => f.event === 'usage')).toBe(true);
    const gap = frames[1000]!;
    expect(gap.event).toBe('gap');
    frames.push(...(await stream.next(1)));
    await stream.close();
    const after = frames[999]!.data.seq as number;
    expect(gap.data).toMatchObject({ object: 'usage.gap', after_seq: after, missed: 838 });
    expect(gap.id).toBe(String(gap.data.through_seq));
    expect(gap.data.events_url).toBe(`/v1/usage/events?cursor=${encodeURIComponent(gap.data.cursor)}`);
    // The stream goes on after the gap: the next event is the live one.
    expect([frames[1001]!.event, frames[1001]!.data.request_id]).toEqual(['usage', live]);
    // The cursor lists exactly the events not replayed, newest first, down to after_seq.
    const listed: number[] = [];
    for (let cursor: string | null = gap.data.cursor; cursor; ) {
      const page: { events: Array<{ seq: number }>; next_cursor: string | null } = await a.client.request('GET', '/v1/usage/events', { query: { limit: 1000, cursor } });
      const inGap = page.events.filter((e) => e.seq > after);
      listed.push(...inGap.map((e) => e.seq));
      cursor = inGap.length === page.events.length ? page.next_cursor : null;
    }
    expect(listed).toHaveLength(838);
    expect(listed[0]).toBe(gap.data.through_seq);
    const replayedSeqs = frames.slice(0, 1000).map((f) => f.data.seq as number);
    expect(new Set([...replayedSeqs, ...listed]).size).toBe(1838);
  });

  it('delivers events settled by another control-plane process (LISTEN/NOTIFY)', async () => {
    if (TEST_DB_KIND === 'pglite') return; // one process per embedded database
    const other = await startTestGateway({ share: { databaseUrl: (t as any).databaseUrl, dataDir: (t as any).dataDir }, clock: t.clock });
    try {
      const a = await account([]);
      const res = await fetch(`${t.url}/v1/usage/stream`, { headers: { authorization: `Bearer ${a.token}` } });
      const pending = readEvents(res, 1);
      const k = await a.client.createKey();
      const rid = await notarize(asKey(other.url, k.key), 9);
      expect((await pending)[0]!.data.request_id).toBe(rid);
    } finally {
      await other.stop();
    }
  });
});
