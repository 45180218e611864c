import { createHash } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { verifyMessage } from 'ethers';
import { RECEIPT_HEADERS } from '@svc/shared';
import type { SvcClient } from '@svc/shared/client';
import { expectApiError } from './support/expect-error.ts';
import { fundedKey, type TestGateway } from './support/gateway.ts';
import type { TestUpstream } from './support/upstream.ts';
import { FUND, closeInferenceEnv, startInferenceEnv, user } from './support/inference-env.ts';

/**
 * Source sets end to end: a real gateway whose inference provider is a real OpenAI-compatible server on
 * loopback (inference-env.ts), the stock `openai` and `@anthropic-ai/sdk` clients citing a set by header, and
 * the ordered root recomputed here from the public members alone, by the algorithm docs/sources.md states.
 */
interface MemberIn {
  label: string;
  sha256: string;
  byte_len: number;
}
interface SetView {
  id: string;
  object: string;
  root: string;
  root_algorithm: string;
  member_count: number;
  created_at: string;
  public_url: string;
  root_recomputes?: boolean;
  members?: MemberIn[];
}
interface Proof extends SetView {
  root_recomputes: boolean;
  recomputed_root: string | null;
  members: MemberIn[];
}
type Account = Awaited<ReturnType<typeof fundedKey>>;
type Payload = Record<string, unknown> & { id: string; context?: { root: string; source_set_id: string } };

const HEADER = 'X-Svc-Source-Set';

let up: TestUpstream;
let t: TestGateway;
let alice: Account;
let bob: Account;

beforeAll(async () => {
  ({ up, t } = await startInferenceEnv());
  [alice, bob] = [await fundedKey(t, FUND), await fundedKey(t, FUND)];
});
afterAll(() => closeInferenceEnv({ up, t }));
beforeEach(() => up.reset());

// --- the documented root, written here again from docs/sources.md -----------------------------------------
const sha = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();
function recomputeRoot(members: MemberIn[]): string {
  const sorted = [...members].sort((a, b) => Buffer.compare(Buffer.from(a.label, 'utf8'), Buffer.from(b.label, 'utf8')));
  let level: Buffer[] = sorted.map((m) => {
    const label = Buffer.from(m.label, 'utf8');
    const len = Buffer.alloc(4);
    len.writeUInt32BE(label.length);
    const size = Buffer.alloc(8);
    size.writeBigUInt64BE(BigInt(m.byte_len));
    return sha(Buffer.from([0x00]), len, label, Buffer.from(m.sha256, 'hex'), size);
  });
  while (level.length > 1) {
    const next: Buffer[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(sha(Buffer.from([0x01]), level[i]!, level[i + 1]!));
    if (level.length % 2 === 1) next.push(level.at(-1)!);
    level = next;
  }
  return level[0]!.toString('hex');
}

const fingerprint = (label: string, content: string): MemberIn => ({ label, sha256: createHash('sha256').update(content).digest('hex'), byte_len: Buffer.byteLength(content) });
const api = <T>(c: SvcClient, method: string, path: string, body?: unknown) => c.request<T>(method, path, body === undefined ? {} : { body });
const register = (c: SvcClient, members: unknown) => api<SetView>(c, 'POST', '/v1/sources/sets', { members });
const publicProof = async (id: string) => {
  const res = await fetch(`${t.url}/v1/sources/public/${id}`);
  return { status: res.status, body: (await res.json()) as Proof & { error?: { type: string; message: string } } };
};
const rows = async () => {
  const db = t.gw.database.db;
  const n = async (table: 'source_sets' | 'source_set_members') => Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
  return { sets: await n('source_sets'), members: await n('source_set_members') };
};
/** The error body without its request id, to compare two refusals. */
const bodyOf = (e: { body: unknown }) => {
  const { request_id: _, ...rest } = (e.body as { error: Record<string, unknown> }).error;
  return rest;
};

/** A receipt's canonical payload and signature from response headers, checked against the published signer. */
async function signedHeaders(res: Response): Promise<Payload> {
  const canonical = Buffer.from(res.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
  const { address } = (await (await fetch(`${t.url}/v1/receipts/pubkey`)).json()) as { address: string };
  expect(verifyMessage(canonical, res.headers.get(RECEIPT_HEADERS.signature)!)).toBe(address);
  return JSON.parse(canonical) as Payload;
}

/** A stored receipt (once its write-behind settle committed), its signature checked over the stored text. */
async function storedSigned(id: string): Promise<Payload> {
  await t.gw.services.metering.settledAll();
  const row = await t.gw.database.db.selectFrom('receipts').select(['payload', 'signature']).where('id', '=', id).executeTakeFirstOrThrow();
  expect(verifyMessage(row.payload, row.signature)).toBe(t.gw.services.signer.address);
  return JSON.parse(row.payload) as Payload;
}

const docs = [fingerprint('reports/q3.pdf', 'third quarter'), fingerprint('README.md', '# readme\n'), fingerprint('data/prices.csv', 'a,b\n1,2\n'), fingerprint('émoji-😀.txt', '😀')];
let set: SetView;

describe('source sets', () => {
  it('registers a set: members in root order, digests stored lowercase, a root anyone recomputes', async () => {
    const given = [docs[0]!, { ...docs[1]!, sha256: docs[1]!.sha256.toUpperCase() }, docs[2]!, docs[3]!];
    set = await register(alice.client, given);
    expect(set.id).toMatch(/^srcset_[0-9a-z]{24}$/);
    expect(set).toMatchObject({ object: 'source_set', root_algorithm: 'svc-source-set-v1', member_count: 4, root_recomputes: true, public_url: `${t.url}/v1/sources/public/${set.id}` });
    expect(set.members!.map((m) => m.label)).toEqual(['README.md', 'data/prices.csv', 'reports/q3.pdf', 'émoji-😀.txt']);
    expect(set.members!.find((m) => m.label === 'README.md')!.sha256).toBe(docs[1]!.sha256);
    expect(set.root).toMatch(/^[0-9a-f]{64}$/);
    expect(set.root).toBe(recomputeRoot(docs));
    // The order members are given in does not matter.
    const again = await register(alice.client, [...docs].reverse());
    expect(again.root).toBe(set.root);
    expect(again.id).not.toBe(set.id);
    await api(alice.client, 'DELETE', `/v1/sources/sets/${again.id}`);
  });

  it('public proof: members, root, and root_recomputes computed on each read from the stored members', async () => {
    const { status, body } = await publicProof(set.id);
    expect(status).toBe(200);
    expect(body).toMatchObject({ id: set.id, object: 'source_set_proof', root: set.root, root_recomputes: true, recomputed_root: set.root, member_count: 4 });
    expect(Object.keys(body)).not.toContain('account_id');
    expect(body.members).toEqual(set.members);
    // Recomputed here from the public members alone.
    expect(recomputeRoot(body.members)).toBe(body.root);
  });

  it('a member altered in the database no longer recomputes to the root (public proof and owner view)', async () => {
    const victim = await register(alice.client, [fingerprint('a.txt', 'a'), fingerprint('b.txt', 'b'), fingerprint('c.txt', 'c')]);
    const db = t.gw.database.db;
    await db.updateTable('source_set_members').set({ byte_len: 999 }).where('set_id', '=', victim.id).where('label', '=', 'b.txt').execute();
    const { body } = await publicProof(victim.id);
    expect(body.root).toBe(victim.root);
    expect(body.root_recomputes).toBe(false);
    expect(body.recomputed_root).not.toBe(victim.root);
    expect(recomputeRoot(body.members)).toBe(body.recomputed_root);
    expect((await api<SetView>(alice.client, 'GET', `/v1/sources/sets/${victim.id}`)).root_recomputes).toBe(false);
    // Put back as it was: it recomputes again (nothing is cached between reads).
    await db.updateTable('source_set_members').set({ byte_len: 1 }).where('set_id', '=', victim.id).where('label', '=', 'b.txt').execute();
    expect((await publicProof(victim.id)).body.root_recomputes).toBe(true);
    // A digest altered, then a member removed.
    await db.updateTable('source_set_members').set({ sha256: 'f'.repeat(64) }).where('set_id', '=', victim.id).where('label', '=', 'a.txt').execute();
    expect((await publicProof(victim.id)).body.root_recomputes).toBe(false);
    await db.deleteFrom('source_set_members').where('set_id', '=', victim.id).execute();
    expect((await publicProof(victim.id)).body).toMatchObject({ root_recomputes: false, recomputed_root: null, members: [] });
    await api(alice.client, 'DELETE', `/v1/sources/sets/${victim.id}`);
  });

  it('lists live sets newest first in the `sets` envelope, without members; each account sees only its own', async () => {
    const second = await register(alice.client, [fingerprint('one', '1')]);
    const third = await register(alice.client, [fingerprint('two', '2')]);
    const list = await api<{ sets: SetView[] }>(alice.client, 'GET', '/v1/sources/sets');
    expect(Object.keys(list)).toEqual(['sets']);
    expect(list.sets.map((s) => s.id)).toEqual([third.id, second.id, set.id]);
    expect(list.sets[2]).toEqual({ id: set.id, object: 'source_set', root: set.root, root_algorithm: 'svc-source-set-v1', member_count: 4, created_at: set.created_at, public_url: set.public_url });
    expect(await api(bob.client, 'GET', '/v1/sources/sets')).toEqual({ sets: [] });
    for (const s of [second, third]) await api(alice.client, 'DELETE', `/v1/sources/sets/${s.id}`);
  });

  it("another account's set answers exactly as a missing one (GET and DELETE)", async () => {
    expect((await api<SetView>(alice.client, 'GET', `/v1/sources/sets/${set.id}`)).members).toEqual(set.members);
    for (const method of ['GET', 'DELETE']) {
      const foreign = await expectApiError(api(bob.client, method, `/v1/sources/sets/${set.id}`), 404, 'not_found');
      const missing = await expectApiError(api(bob.client, method, '/v1/sources/sets/srcset_doesnotexist0000000000'), 404, 'not_found');
      expect(bodyOf(foreign)).toEqual(bodyOf(missing));
    }
    expect((await publicProof(set.id)).status).toBe(200); // bob's DELETE did nothing
    const unknown = await publicProof('srcset_doesnotexist0000000000');
    expect(unknown).toMatchObject({ status: 404, body: { error: { type: 'not_found', message: 'Source set not found' } } });
  });

  it('refuses bad input with a 400 naming the field, and writes nothing', async () => {
    const ok = (label = 'x') => fingerprint(label, label);
    const many = Array.from({ length: 1001 }, (_, i) => ok(`f${i}`));
    const cases: Array<[string, unknown, string]> = [
      ['unknown top-level field', { members: [ok()], name: 'my set' }, 'name'],
      ['unknown member field', { members: [ok('a'), { ...ok('b'), mime: 'text/plain' }] }, 'members[1].mime'],
      ['duplicate label', { members: [ok('a'), ok('b'), { ...ok('c'), label: 'a' }] }, 'members[2].label'],
      ['digest too short', { members: [{ ...ok(), sha256: 'a'.repeat(63) }] }, 'members[0].sha256'],
      ['digest not hex', { members: [{ ...ok(), sha256: 'g'.repeat(64) }] }, 'members[0].sha256'],
      ['digest with 0x', { members: [{ ...ok(), sha256: `0x${'a'.repeat(64)}` }] }, 'members[0].sha256'],
      ['negative byte_len', { members: [{ ...ok(), byte_len: -1 }] }, 'members[0].byte_len'],
      ['fractional byte_len', { members: [{ ...ok(), byte_len: 1.5 }] }, 'members[0].byte_len'],
      ['byte_len as a string', { members: [{ ...ok(), byte_len: '12' }] }, 'members[0].byte_len'],
      ['byte_len past 2^53-1', { members: [{ ...ok(), byte_len: 2 ** 53 }] }, 'members[0].byte_len'],
      ['byte_len missing', { members: [{ label: 'x', sha256: ok().sha256 }] }, 'members[0].byte_len'],
      ['empty label', { members: [ok('')] }, 'members[0].label'],
      ['label too long', { members: [ok('l'.repeat(257))] }, 'members[0].label'],
      ['control character in label', { members: [ok('a\nb')] }, 'members[0].label'],
      ['lone surrogate in label', { members: [{ ...ok(), label: 'a\ud800' }] }, 'members[0].label'],
      ['empty member list', { members: [] }, 'members'],
      ['too many members', { members: many }, 'members'],
      ['members missing', {}, 'members'],
      ['members not a list', { members: ok() }, 'members'],
    ];
    const before = await rows();
    for (const [what, body, param] of cases) {
      const e = await expectApiError(api(alice.client, 'POST', '/v1/sources/sets', body), 400, 'invalid_request');
      expect({ what, param: e.param }).toEqual({ what, param });
      expect(e.message, what).toContain(param);
    }
    expect(await rows()).toEqual(before);
  });

  it('takes 1000 members, the most a set holds', async () => {
    const members = Array.from({ length: 1000 }, (_, i) => fingerprint(`file-${i}.txt`, `content ${i}`));
    const big = await register(alice.client, members);
    expect(big.member_count).toBe(1000);
    const { body } = await publicProof(big.id);
    expect(body.root_recomputes).toBe(true);
    expect(recomputeRoot(body.members)).toBe(big.root);
    await api(alice.client, 'DELETE', `/v1/sources/sets/${big.id}`);
  });
});

describe('inference receipts citing a set', () => {
  let cited: Payload;

  it('chat completions (openai SDK, default header): the signed receipt carries context.root and the set id', async () => {
    const oa = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/v1`, maxRetries: 0, defaultHeaders: { [HEADER]: set.id } });
    const { data, response } = await oa.chat.completions.create({ model: 'test-chat', messages: user('Cite my sources') }).withResponse();
    expect(data.choices[0]!.message.content).toBe(up.switches.reply);
    cited = await signedHeaders(response);
    expect(cited.context).toEqual({ root: set.root, source_set_id: set.id });
    expect(cited.context!.root).toBe(recomputeRoot((await publicProof(set.id)).body.members));
    expect(await storedSigned(cited.id)).toEqual(cited);
  });

  it('the same header on a streamed chat, embeddings (per-request headers), Messages and Responses', async () => {
    const oa = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const headers = { [HEADER]: set.id };
    const context = { root: set.root, source_set_id: set.id };

    const { data: stream, response: streamed } = await oa.chat.completions.create({ model: 'test-chat', messages: user('Stream it'), stream: true }, { headers }).withResponse();
    for await (const _ of stream) void _;
    expect((await storedSigned(streamed.headers.get(RECEIPT_HEADERS.id)!)).context).toEqual(context);

    const emb = await oa.embeddings.create({ model: 'test-embed', input: 'embed me' }, { headers }).withResponse();
    expect((await signedHeaders(emb.response)).context).toEqual(context);

    const resp = await oa.responses.create({ model: 'test-chat', input: 'Respond' }, { headers }).withResponse();
    expect((await signedHeaders(resp.response)).context).toEqual(context);

    const an = new Anthropic({ authToken: alice.key, apiKey: null, baseURL: t.url, maxRetries: 0, defaultHeaders: headers });
    const msg = await an.messages.create({ model: 'test-chat', max_tokens: 50, messages: user('Message') }).withResponse();
    expect((await signedHeaders(msg.response)).context).toEqual(context);
  });

  it('a call without the header carries no context', async () => {
    const oa = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const { response } = await oa.chat.completions.create({ model: 'test-chat', messages: user('No sources') }).withResponse();
    const payload = await signedHeaders(response);
    expect(Object.keys(payload)).not.toContain('context');
  });

  it("refuses an unknown, another account's or a malformed set before anything is held: no upstream call, no charge", async () => {
    const balance = async (id: string) => (await t.gw.services.metering.settledAll(), (await t.gw.services.metering.position(id)).balance_micro_usd);
    const events = async (id: string) => (await t.gw.database.db.selectFrom('usage_events').select('id').where('account_id', '=', id).execute()).length;
    const upstreamCalls = up.requests.length;
    const before = { alice: await balance(alice.accountId), bob: await balance(bob.accountId), bobEvents: await events(bob.accountId), aliceEvents: await events(alice.accountId) };
    const asBob = new OpenAI({ apiKey: bob.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const asAlice = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/v1`, maxRetries: 0 });
    const chat = (c: OpenAI, id: string) => c.chat.completions.create({ model: 'test-chat', messages: user('hi') }, { headers: { [HEADER]: id } });

    const foreign = await chat(asBob, set.id).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    const unknown = await chat(asAlice, 'srcset_doesnotexist0000000000').catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    for (const e of [foreign, unknown]) {
      expect(e).toBeInstanceOf(OpenAI.NotFoundError);
      expect(e).toMatchObject({ status: 404, type: 'not_found', param: 'x-svc-source-set', error: { message: 'Source set not found' } });
    }
    const malformed = await chat(asAlice, 's'.repeat(65)).catch((e: unknown) => e as InstanceType<typeof OpenAI.APIError>);
    expect(malformed).toMatchObject({ status: 400, type: 'invalid_request', param: 'x-svc-source-set' });
    const an = new Anthropic({ authToken: bob.key, apiKey: null, baseURL: t.url, maxRetries: 0, defaultHeaders: { [HEADER]: set.id } });
    await expect(an.messages.create({ model: 'test-chat', max_tokens: 10, messages: user('hi') })).rejects.toMatchObject({ status: 404 });

    expect(up.requests.length).toBe(upstreamCalls);
    expect({ alice: await balance(alice.accountId), bob: await balance(bob.accountId), bobEvents: await events(bob.accountId), aliceEvents: await events(alice.accountId) }).toEqual(before);
  });

  it('taking the set down: its proof answers 404, it can no longer be cited, and the old receipt still cites its root', async () => {
    const foreign = await expectApiError(api(bob.client, 'DELETE', `/v1/sources/sets/${set.id}`), 404, 'not_found');
    const down = await api<{ id: string; deleted: boolean; root: string; deleted_at: string }>(alice.client, 'DELETE', `/v1/sources/sets/${set.id}`);
    expect(down).toMatchObject({ id: set.id, object: 'source_set', deleted: true, root: set.root, deleted_at: expect.any(String) });

    const gone = await publicProof(set.id);
    const never = await publicProof('srcset_doesnotexist0000000000');
    expect([gone.status, never.status]).toEqual([404, 404]);
    expect(bodyOf(gone)).toEqual(bodyOf(never));
    expect(bodyOf(await expectApiError(api(alice.client, 'GET', `/v1/sources/sets/${set.id}`), 404, 'not_found'))).toEqual(bodyOf(foreign));
    expect(bodyOf(await expectApiError(api(alice.client, 'DELETE', `/v1/sources/sets/${set.id}`), 404, 'not_found'))).toEqual(bodyOf(foreign));
    expect((await api<{ sets: SetView[] }>(alice.client, 'GET', '/v1/sources/sets')).sets.map((s) => s.id)).not.toContain(set.id);
    // Content-free row kept, members gone.
    const db = t.gw.database.db;
    expect(await db.selectFrom('source_sets').select(['root', 'deleted_at']).where('id', '=', set.id).executeTakeFirstOrThrow()).toMatchObject({ root: set.root, deleted_at: expect.any(Date) });
    expect(await db.selectFrom('source_set_members').select('label').where('set_id', '=', set.id).execute()).toEqual([]);

    const oa = new OpenAI({ apiKey: alice.key, baseURL: `${t.url}/v1`, maxRetries: 0, defaultHeaders: { [HEADER]: set.id } });
    await expect(oa.chat.completions.create({ model: 'test-chat', messages: user('hi') })).rejects.toMatchObject({ status: 404, param: 'x-svc-source-set' });

    // The receipt signed before the take-down is as it was, through the owner's receipt route and the public verifier.
    const r = await api<{ payload: Payload; canonical: string; signature: string }>(alice.client, 'GET', `/v1/receipts/${cited.id}`);
    expect(r.payload).toEqual(cited);
    expect(r.payload.context).toEqual({ root: set.root, source_set_id: set.id });
    const verified = await (await fetch(`${t.url}/v1/receipts/verify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ receipt: r.canonical, signature: r.signature }) })).json();
    expect(verified).toMatchObject({ valid: true, recovered_address: t.gw.services.signer.address });
  });

  it('the OpenAPI document lists the header on every inference route and the five source-set routes with their auth', async () => {
    const doc = (await (await fetch(`${t.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, { parameters?: Array<{ name: string; in: string }>; security: unknown[] }>> };
    for (const path of ['/v1/chat/completions', '/v1/embeddings', '/v1/messages', '/v1/responses']) {
      expect(doc.paths[path]!.post!.parameters!.some((p) => p.in === 'header' && p.name === 'x-svc-source-set'), path).toBe(true);
    }
    expect(doc.paths['/v1/sources/sets']!.post!.security).toEqual([{ session: [] }, { sessionCookie: [] }]);
    expect(doc.paths['/v1/sources/sets']!.get!.security).toEqual([{ session: [] }, { sessionCookie: [] }]);
    expect(doc.paths['/v1/sources/sets/{id}']!.get!.security).toEqual([{ session: [] }, { sessionCookie: [] }]);
    expect(doc.paths['/v1/sources/sets/{id}']!.delete!.security).toEqual([{ session: [] }, { sessionCookie: [] }]);
    expect(doc.paths['/v1/sources/public/{id}']!.get!.security).toEqual([]);
  });
});
