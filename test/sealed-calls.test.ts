import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recoverMessageAddress, verifyMessage, type Hex } from 'viem';
import canonicalize from 'canonicalize';
import pg from 'pg';
import { SvcClient, type ApiError } from '@svc/shared/client';
import { startTestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { expectApiError } from './support/expect-error.ts';
import { buf, hex, rootFromPath } from './support/merkle.ts';

/**
 * Sealed calls end to end: commit with a session and with a key, content-free lists, reveal (idempotent),
 * withdrawal (text and salt gone from the row, commitment, receipt and anchor kept), refusals, the 500
 * cap under racing commits, and the public record. Every proof is checked with code independent of the
 * gateway's: node's sha256 for the commitment, viem for the EIP-191 receipt, an RFC 6962 verifier of the
 * test's own for the anchor's inclusion proof.
 */

interface Anchor { state: string; hash: string; root: string | null; leaf_index: number | null; tree_size: number | null; proof: string[] }
interface Call {
  id: string;
  object: 'sealed_call';
  state: 'committed' | 'revealed' | 'withdrawn';
  commitment: string;
  created_at: string;
  revealed_at: string | null;
  withdrawn_at: string | null;
  receipt: { id: string; payload: Record<string, any>; canonical: string; hash: string; signature: Hex; signer: string };
  anchor: Anchor;
  public_url: string;
  page_url: string;
}
type Revealed = Call & { text: string; salt_hex: string };
type PublicCall = Call & { text: string | null; salt_hex: string | null; commitment_scheme: string; trust_model: string };
interface CallList { calls: Call[]; count: number; cap: number; trust_model: string }

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
/** sha256(salt || UTF-8 text), as docs/sealed-calls.md defines it. */
const commitmentOf = (saltHex: string, text: string) => `0x${sha256(Buffer.from(saltHex, 'hex'), Buffer.from(text, 'utf8')).toString('hex')}`;

let t: Awaited<ReturnType<typeof startTestGateway>>;
let signer: string;
beforeAll(async () => {
  t = await startTestGateway();
  signer = ((await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string }).address;
});
afterAll(async () => t?.close());

async function account() {
  const s = await t.signIn();
  const key = await s.client.createKey({ scopes: ['proofs'] });
  return { ...s, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'key', token: key.key } }) };
}
type Account = Awaited<ReturnType<typeof account>>;

const commit = (c: SvcClient, text: string) => c.request<Call>('POST', '/v1/calls', { body: { text } });
const commitWithKey = (c: SvcClient, text: string) => c.request<Call>('POST', '/v1/calls/commit', { body: { text } });
const reveal = (c: SvcClient, id: string) => c.request<Revealed>('POST', `/v1/calls/${id}/reveal`);
const withdraw = (c: SvcClient, id: string) => c.request<Call>('POST', `/v1/calls/${id}/withdraw`);
const publicCall = (id: string) => t.client.request<PublicCall>('GET', `/v1/calls/public/${id}`, { credential: null });
const row = (id: string) => t.gw.database.db.selectFrom('sealed_calls').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const rows = async (accountId: string) =>
  Number((await t.gw.database.db.selectFrom('sealed_calls').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow()).n);
const leaves = async () => Number((await t.gw.database.db.selectFrom('anchor_leaves').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

/** The receipt checked as a third party would: viem against the published signer, over the exact canonical text. */
async function expectGenuineReceipt(c: Call, accountId: string, keyId: string | null) {
  expect(await recoverMessageAddress({ message: c.receipt.canonical, signature: c.receipt.signature })).toBe(signer);
  expect(await verifyMessage({ address: signer as Hex, message: c.receipt.canonical, signature: c.receipt.signature })).toBe(true);
  expect(canonicalize(c.receipt.payload)).toBe(c.receipt.canonical);
  expect(c.receipt.hash).toBe(`0x${sha256(Buffer.from(c.receipt.canonical)).toString('hex')}`);
  expect(c.receipt.payload).toMatchObject({ kind: 'sealed_call', id: c.receipt.id, call_id: c.id, commitment: c.commitment, account_id: accountId, key_id: keyId, cost_micro_usd: 0, signer });
  const verified = await t.client.request<{ valid: boolean; recovered_address: string }>('POST', '/v1/receipts/verify', { body: { receipt: c.receipt.canonical, signature: c.receipt.signature }, credential: null });
  expect(verified).toMatchObject({ valid: true, recovered_address: signer });
}

/** Runs `race` while this test holds the account row's lock, releasing it once two transactions wait for it. */
async function raceOnServer<T>(accountId: string, race: () => Promise<T>): Promise<T> {
  const holder = new pg.Client({ connectionString: t.databaseUrl });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query('select id from accounts where id = $1 for update', [accountId]);
    const running = race();
    await expect
      .poll(async () => {
        await holder.query('select pg_stat_clear_snapshot()'); // activity is otherwise read once per transaction
        return Number((await holder.query(`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rows[0].n);
      }, { timeout: 10_000 })
      .toBe(2);
    await holder.query('rollback');
    return await running;
  } finally {
    await holder.end();
  }
}

describe('sealed calls', () => {
  let a: Account;
  let b: Account;
  beforeAll(async () => {
    a = await account();
    b = await account();
  });

  it('commits with a session and with a key: server-made salt and commitment, a signed receipt, the commitment queued for anchoring', async () => {
    const s = await commit(a.client, 'Team A wins 2-1');
    expect(s).toMatchObject({ object: 'sealed_call', state: 'committed', revealed_at: null, withdrawn_at: null });
    expect(s.id).toMatch(/^call_[0-9a-z]{24}$/);
    expect(s.commitment).toMatch(/^0x[0-9a-f]{64}$/);
    expect(s).not.toHaveProperty('text');
    expect(s).not.toHaveProperty('salt_hex');
    expect(s.page_url).toBe(`${t.url}/c/${s.id}`);
    expect(s.receipt.id).toMatch(/^req_/);
    await expectGenuineReceipt(s, a.accountId, null);
    // No chain is configured here: queued, in no batch yet.
    expect(s.anchor).toMatchObject({ state: 'not_anchored', hash: s.commitment, root: null, proof: [] });

    t.clock.advance(1000);
    const keyId = (await a.client.listKeys())[0]!.id;
    const k = await commitWithKey(a.api, 'Team B wins');
    expect(k.commitment).not.toBe(s.commitment);
    await expectGenuineReceipt(k, a.accountId, keyId);
    expect(k.receipt.payload.route).toBe('POST /v1/calls/commit');

    // The same text twice: a fresh salt, another commitment.
    const again = await commit(a.client, 'Team A wins 2-1');
    expect(again.commitment).not.toBe(s.commitment);
  });

  it('lists the account\'s calls content-free, newest first, with count, cap and the trust model; the key sees the same', async () => {
    const fresh = await account();
    expect(await fresh.client.request<CallList>('GET', '/v1/calls')).toMatchObject({ calls: [], count: 0, cap: 500 });
    const one = await commit(fresh.client, 'first');
    const two = await commitWithKey(fresh.api, 'second');
    const three = await commit(fresh.client, 'third');
    const list = await fresh.client.request<CallList>('GET', '/v1/calls');
    expect(list.calls.map((c) => c.id)).toEqual([three.id, two.id, one.id]);
    expect(list).toMatchObject({ count: 3, cap: 500 });
    expect(list.trust_model).toMatch(/proves neither/);
    for (const c of list.calls) {
      expect(c).not.toHaveProperty('text');
      expect(c).not.toHaveProperty('salt_hex');
      expect(JSON.stringify(c)).not.toMatch(/first|second|third/);
    }
    expect(await fresh.api.request<CallList>('GET', '/v1/calls/mine')).toEqual(list);
    // Another account's list holds none of them.
    expect((await b.client.request<CallList>('GET', '/v1/calls')).calls.map((c) => c.id)).not.toContain(one.id);
  });

  it('reveals text and salt_hex that recompute the commitment; revealing again answers the same; the public record shows them after reveal only', async () => {
    const text = 'Grüße 🚀: the forecast is rain\non Tuesday';
    const c = await commit(a.client, text);
    const before = await publicCall(c.id);
    expect(before).toMatchObject({ id: c.id, state: 'committed', commitment: c.commitment, text: null, salt_hex: null });
    expect(before.receipt.canonical).toBe(c.receipt.canonical);

    t.clock.advance(5000);
    const r = await reveal(a.client, c.id);
    expect(r).toMatchObject({ id: c.id, state: 'revealed', text, commitment: c.commitment });
    expect(r.salt_hex).toMatch(/^[0-9a-f]{64}$/);
    expect(commitmentOf(r.salt_hex, text)).toBe(c.commitment);
    expect(r.revealed_at).toBe(t.clock.now().toISOString());

    t.clock.advance(60_000);
    const again = await reveal(a.client, c.id);
    expect(again).toEqual({ ...r, anchor: again.anchor });
    expect(again.revealed_at).toBe(r.revealed_at);
    const viaKey = await a.api.request<Revealed>('POST', `/v1/calls/commit/${c.id}/reveal`);
    expect(viaKey).toMatchObject({ text, salt_hex: r.salt_hex, revealed_at: r.revealed_at });

    const after = await publicCall(c.id);
    expect(after).toMatchObject({ state: 'revealed', text, salt_hex: r.salt_hex, revealed_at: r.revealed_at });
    expect(commitmentOf(after.salt_hex!, after.text!)).toBe(after.commitment);
    expect(after.commitment_scheme).toMatch(/32 salt bytes, then the UTF-8 bytes of the text/);
  });

  it('withdraws: text and salt leave the row in the statement that sets the state; commitment, receipt and anchor stay; reveal then answers 409', async () => {
    const committed = await commit(a.client, 'never to be told');
    const revealed = await commit(a.client, 'told, then withdrawn');
    await reveal(a.client, revealed.id);
    expect((await row(committed.id)).text_sealed).not.toBeNull();
    // Sealed at rest: the row holds no plaintext.
    expect(Buffer.from((await row(committed.id)).text_sealed!).toString('latin1')).not.toContain('never to be told');

    t.clock.advance(2000);
    for (const c of [committed, revealed]) {
      const w = await withdraw(a.client, c.id);
      expect(w).toMatchObject({ id: c.id, state: 'withdrawn', commitment: c.commitment, withdrawn_at: t.clock.now().toISOString() });
      expect(w.receipt).toEqual(c.receipt);
      expect(w.anchor.hash).toBe(c.commitment);
      const stored = await row(c.id);
      expect(stored).toMatchObject({ state: 'withdrawn', text_sealed: null, salt_sealed: null, commitment: c.commitment, receipt_payload: c.receipt.canonical, receipt_signature: c.receipt.signature });
      const pub = await publicCall(c.id);
      expect(pub).toMatchObject({ state: 'withdrawn', text: null, salt_hex: null, commitment: c.commitment, receipt: c.receipt });
      expect(pub.anchor.hash).toBe(c.commitment);
      await expectGenuineReceipt(pub, a.accountId, null);

      const refused = await expectApiError(reveal(a.client, c.id), 409, 'conflict');
      expect(refused.message).toMatch(/withdrawn/);
      await expectApiError(a.api.request('POST', `/v1/calls/commit/${c.id}/reveal`), 409, 'conflict');
    }
    expect((await row(revealed.id)).revealed_at).not.toBeNull();

    // Withdrawing again changes nothing.
    t.clock.advance(2000);
    const twice = await withdraw(a.client, committed.id);
    expect(twice.withdrawn_at).toBe((await publicCall(committed.id)).withdrawn_at);
    expect(Date.parse(twice.withdrawn_at!)).toBeLessThan(t.clock.now().getTime());
  });

  it("answers another account's call exactly as a missing one (404), on every owner route", async () => {
    const c = await commit(a.client, 'mine alone');
    const errorOf = async (p: Promise<unknown>) => {
      const e = await expectApiError(p, 404, 'not_found');
      const { request_id: _r, ...rest } = (e as ApiError).body!.error;
      return rest;
    };
    const missing = 'call_000000000000000000000000';
    for (const [client, path] of [
      [b.client, (id: string) => `/v1/calls/${id}/reveal`],
      [b.client, (id: string) => `/v1/calls/${id}/withdraw`],
      [b.api, (id: string) => `/v1/calls/commit/${id}/reveal`],
    ] as const) {
      expect(await errorOf(client.request('POST', path(c.id)))).toEqual(await errorOf(client.request('POST', path(missing))));
    }
    expect((await row(c.id)).state).toBe('committed');
    await expectApiError(publicCall(missing), 404, 'not_found');
    expect((await publicCall(c.id)).text).toBeNull();
  });

  it('refuses a caller-supplied salt or commitment, an unknown field and bad text (400 naming the field), writing nothing', async () => {
    const fresh = await account();
    const queued = await leaves();
    const cases: Array<[unknown, string, RegExp]> = [
      [{ text: 'x', salt: 'aa'.repeat(32) }, 'salt', /gateway draws the salt/],
      [{ text: 'x', salt_hex: 'aa'.repeat(32) }, 'salt_hex', /gateway draws the salt/],
      [{ text: 'x', commitment: `0x${'ab'.repeat(32)}` }, 'commitment', /computes the commitment itself/],
      [{ text: 'x', label: 'hello' }, 'label', /Unrecognized key/],
      [{}, 'text', /text/],
      [{ text: '' }, 'text', /text/],
      [{ text: 42 }, 'text', /string/],
      [{ text: 'a'.repeat(65_537) }, 'text', /text/],
      [{ text: 'lone \ud800 surrogate' }, 'text', /well-formed/],
    ];
    for (const [body, param, message] of cases) {
      for (const send of [() => fresh.client.request('POST', '/v1/calls', { body }), () => fresh.api.request('POST', '/v1/calls/commit', { body })]) {
        const e = await expectApiError(send(), 400, 'invalid_request');
        expect(e.param, JSON.stringify(body).slice(0, 80)).toBe(param);
        expect(e.message).toMatch(message);
      }
    }
    expect(await rows(fresh.accountId)).toBe(0);
    expect(await leaves()).toBe(queued);
  });

  it('holds at most 500 calls per account: two commits racing at 499 make 500, the next is refused naming the limit', async () => {
    const full = await account();
    const now = t.clock.now();
    await t.gw.database.db
      .insertInto('sealed_calls')
      .values(
        Array.from({ length: 498 }, (_, i) => ({
          id: `call_seeded${String(i).padStart(15, '0')}${full.accountId.slice(-4)}`,
          account_id: full.accountId,
          key_id: null,
          state: 'withdrawn' as const,
          commitment: `0x${randomBytes(32).toString('hex')}`,
          text_sealed: null,
          salt_sealed: null,
          receipt_id: `req_seeded_${full.accountId}_${i}`,
          receipt_payload: '{}',
          receipt_hash: `0x${'00'.repeat(32)}`,
          receipt_signature: '0x',
          created_at: now,
          withdrawn_at: now,
        })),
      )
      .execute();
    await commit(full.client, 'the 499th');
    const race = () => Promise.allSettled([commit(full.client, 'racer one'), commitWithKey(full.api, 'racer two')]);
    // On the server the two commits truly overlap: the test holds the account's row lock until both wait for
    // it (without that lock in the commit they would not wait, and both would count 499 and insert). The
    // embedded database runs one transaction at a time.
    const raced = TEST_DB_KIND === 'postgres' ? await raceOnServer(full.accountId, race) : await race();
    expect(raced.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    const lost = (raced.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason;
    const e = await expectApiError(Promise.reject(lost), 409, 'conflict');
    expect(e.body?.error).toMatchObject({ reason: 'call_limit', limit: 500 });
    expect(e.message).toContain('at most 500 sealed calls');
    expect(await rows(full.accountId)).toBe(500);

    const next = await expectApiError(commitWithKey(full.api, 'the 501st'), 409, 'conflict');
    expect(next.body?.error).toMatchObject({ reason: 'call_limit', limit: 500 });
    const list = await full.client.request<CallList>('GET', '/v1/calls');
    expect(list).toMatchObject({ count: 500, cap: 500 });
    expect(list.calls).toHaveLength(500);
    expect(list.calls[0]!.receipt.payload.call_id).toBe(list.calls[0]!.id); // the racer that won, newest first
    expect((await full.api.request<CallList>('GET', '/v1/calls/mine')).count).toBe(500);
  });

  it('batches the commitment for the public anchors: its inclusion proof leads to a root whose document lists it', async () => {
    const c = await commit(a.client, 'to be anchored');
    expect((await publicCall(c.id)).anchor).toMatchObject({ state: 'not_anchored', root: null, leaf_index: null });
    await t.gw.leader.runAllOnce();
    const anchor = (await publicCall(c.id)).anchor;
    expect(anchor).toMatchObject({ state: 'not_anchored', hash: c.commitment });
    expect(anchor.root).toMatch(/^0x[0-9a-f]{64}$/);
    const root = rootFromPath(buf(c.commitment), anchor.leaf_index!, anchor.tree_size!, anchor.proof.map(buf));
    expect(root && hex(root)).toBe(anchor.root);
    const doc = await t.client.request<{ root: string; leaves: string[]; leaf_count: number }>('GET', `/v1/anchors/${anchor.root}`, { credential: null });
    expect(doc.leaves[anchor.leaf_index!]).toBe(c.commitment);
    expect(doc.leaf_count).toBe(anchor.tree_size);
    // The owner's views show the same anchor, and it stays after withdrawal.
    const listed = (await a.client.request<CallList>('GET', '/v1/calls')).calls.find((x) => x.id === c.id)!;
    expect(listed.anchor).toEqual(anchor);
    expect((await withdraw(a.client, c.id)).anchor).toEqual(anchor);
  });
});
