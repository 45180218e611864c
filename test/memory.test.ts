import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyMessage } from 'ethers';
import { RECEIPT_HEADERS } from '@svc/shared';
import { SvcClient } from '@svc/shared/client';
import { chunkText } from '../control-plane/src/modules/memory/chunking.ts';
import { ENFORCED_BILLING, startTestGateway, type TestGateway } from './support/gateway.ts';
import { TEST_DB_KIND } from './support/database.ts';
import { startScriptedUpstream, type ScriptedUpstream } from './support/scripted-upstream.ts';

/**
 * Memory collections end to end over a real local embeddings upstream: a bag-of-words hashing embedder, so a
 * query that shares words with a stored chunk finds it. Documents are chunked, embedded through the metered
 * inference path under the caller's key (usage events, signed receipts, the balance moved by exactly the
 * priced tokens), sealed at rest; search returns the nearest chunks unsealed. On the embedded database the
 * vectors sit in pgvector behind an HNSW index; on the Postgres server here (no pgvector) search is an exact
 * scan in SQL; the same assertions hold on both.
 */

const IN = 2_000_000; // micro-USD per million input tokens: 2 per token
const DIMS = 64;

/** Lower-case words, as the embedder and its token count see them. */
const wordsOf = (s: string) => s.toLowerCase().match(/[a-z0-9]+/g) ?? [];

/** Bag of words: each word adds one to a dimension chosen by its hash, with a sign also from its hash. */
function embed(text: string, dims: number): number[] {
  const v: number[] = new Array<number>(dims).fill(0);
  for (const w of wordsOf(text)) {
    const h = createHash('sha256').update(w).digest();
    v[h.readUInt32BE(0) % dims]! += h[4]! & 1 ? 1 : -1;
  }
  if (!v.some((x) => x !== 0)) v[0] = 1;
  return v;
}

let t: TestGateway;
let up: ScriptedUpstream;
/** The dimension the embedder answers with (a test changes it). */
let dims = DIMS;

beforeAll(async () => {
  up = await startScriptedUpstream();
  up.handler = (req, body, res) => {
    if (req.url !== '/v1/embeddings') return void res.writeHead(404).end('{}');
    const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
    const tokens = inputs.reduce((s, x) => s + wordsOf(x).length, 0);
    const data = inputs.map((x, index) => ({ object: 'embedding', index, embedding: embed(x, dims) }));
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } }));
  };
  t = await startTestGateway({
    env: {
      ...ENFORCED_BILLING,
      SVC_PROVIDERS: JSON.stringify([
        {
          name: 'local',
          base_url: up.url,
          models: [
            { id: 'test-embed', input_micro_usd_per_mtok: IN, embedding: true },
            { id: 'test-chat', input_micro_usd_per_mtok: IN, output_micro_usd_per_mtok: IN },
          ],
        },
      ]),
    },
  });
});
afterAll(async () => {
  await t?.close();
  await up?.close();
});

/** A signed-in account with credit and a key holding only the memory scope. */
async function account(credit = 50_000_000) {
  const s = await t.signIn();
  await t.gw.services.metering.credit(s.accountId, credit, 'grant', `grant-${s.accountId}`);
  const key = await s.client.createKey({ scopes: ['memory'] });
  return { ...s, keyId: key.id, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: key.key } }) };
}
type Account = Awaited<ReturnType<typeof account>>;

async function send(a: Account, method: string, path: string, body?: unknown) {
  const res = await a.api.raw(method, path, body === undefined ? {} : { body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const balance = async (a: Account) => (await t.gw.services.metering.settledAll(), (await t.gw.services.metering.position(a.accountId)).balance_micro_usd);
const events = async (a: Account) => (await t.gw.services.metering.settledAll(), await t.gw.database.db.selectFrom('usage_events').selectAll().where('account_id', '=', a.accountId).orderBy('n').execute());
const chunkRows = (collectionId: string) => t.gw.database.db.selectFrom('memory_chunks').selectAll().where('collection_id', '=', collectionId).orderBy('document_id').orderBy('chunk_index').execute();

async function collection(a: Account, body: Record<string, unknown> = { name: 'notes', model: 'test-embed' }) {
  const r = await send(a, 'POST', '/v1/memory/collections', body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body as { id: string; dimensions: number | null };
}

const TOPICS = {
  volcano: 'Volcanoes erupt when magma rises through the crust; lava flows and ash clouds follow the eruption of a volcano near the island.',
  bread: 'To bake sourdough bread you feed the starter with flour and water, knead the dough, let it rise overnight and bake it in a hot oven.',
  tides: 'Ocean tides are driven by the gravity of the moon and the sun; spring tides come at full and new moon, neap tides in between.',
};
/** A document of many paragraphs (several chunks), each on one topic, padded so chunks stay on topic. */
const DOCUMENT = [TOPICS.volcano, TOPICS.bread, TOPICS.tides].map((p) => `${p} ${p} ${p} ${p} ${p}`).join('\n\n');

describe('memory collections', () => {
  let a: Account;
  let mem: { id: string };
  let doc: { id: string; chunks: number; receipt_ids: string[]; cost_micro_usd: number; usage: { prompt_tokens: number } };
  beforeAll(async () => {
    a = await account();
    mem = await collection(a, { name: 'field notes', model: 'test-embed', metadata: { team: 'geo' } });
  });

  it('creates a collection on an embeddings model of the catalog, and refuses anything else naming the field', async () => {
    const list = await send(a, 'GET', '/v1/memory/collections');
    expect(list.status).toBe(200);
    expect(list.body.collections).toEqual([expect.objectContaining({ id: mem.id, object: 'memory.collection', name: 'field notes', model: 'test-embed', dimensions: null, metadata: { team: 'geo' }, documents: 0, chunks: 0 })]);
    const refused = async (body: Record<string, unknown>, param: string) => {
      const r = await send(a, 'POST', '/v1/memory/collections', body);
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request', param });
    };
    await refused({ name: 'x', model: 'test-chat' }, 'model'); // a chat model
    await refused({ name: 'x', model: 'no-such-model' }, 'model');
    await refused({ model: 'test-embed' }, 'name');
    await refused({ name: 'x', model: 'test-embed', metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'metadata');
    await refused({ name: 'x', model: 'test-embed', extra: 1 }, 'extra');
    expect((await send(a, 'GET', '/v1/memory/collections')).body.collections).toHaveLength(1);
  });

  it('stores a document: chunked, embedded under the key as metered embedding usage with a signed receipt, sealed at rest', async () => {
    const before = await balance(a);
    const r = await send(a, 'POST', `/v1/memory/collections/${mem.id}/documents`, { text: DOCUMENT });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    doc = r.body;
    const pieces = chunkText(DOCUMENT);
    expect(pieces.length).toBeGreaterThan(1);
    const tokens = pieces.reduce((s, p) => s + wordsOf(p).length, 0);
    expect(r.body).toMatchObject({ object: 'memory.document', collection_id: mem.id, model: 'test-embed', dimensions: DIMS, characters: DOCUMENT.length, chunks: pieces.length, usage: { prompt_tokens: tokens }, cost_micro_usd: tokens * 2 });
    expect(r.body.chunking).toEqual({ size: 800, overlap: 100, unit: 'characters' });
    // One embeddings call upstream with every chunk, under the gateway's provider.
    expect(up.seen.at(-1)!.body).toEqual({ model: 'test-embed', input: pieces, encoding_format: 'float' });
    // Billing: exactly the priced tokens, one usage event, a signed receipt (in the headers too).
    expect(await balance(a)).toBe(before - tokens * 2);
    const ev = (await events(a)).at(-1)!;
    expect(ev).toMatchObject({ request_id: doc.receipt_ids[0], key_id: a.keyId, kind: 'inference', model: 'test-embed', route: 'POST /v1/memory/collections/:id/documents', cost_micro_usd: tokens * 2 });
    expect(r.headers.get(RECEIPT_HEADERS.id)).toBe(doc.receipt_ids[0]);
    const canonical = Buffer.from(r.headers.get(RECEIPT_HEADERS.payload)!, 'base64url').toString('utf8');
    expect(verifyMessage(canonical, r.headers.get(RECEIPT_HEADERS.signature)!)).toBe(t.gw.services.signer.address);
    expect(JSON.parse(canonical)).toMatchObject({ id: doc.receipt_ids[0], kind: 'inference', model: 'test-embed', cost_micro_usd: tokens * 2, units: { input_tokens: tokens }, detail: { endpoint: 'embeddings' } });
    const stored = await t.gw.database.db.selectFrom('receipts').select('payload').where('id', '=', doc.receipt_ids[0]!).executeTakeFirstOrThrow();
    expect(stored.payload).toBe(canonical);
    // At rest: one row per chunk, its text sealed (no plaintext), its vector of the model's dimension.
    const rows = await chunkRows(mem.id);
    expect(rows.map((x) => [x.document_id, x.chunk_index, x.dims])).toEqual(pieces.map((_, i) => [doc.id, i, DIMS]));
    for (const [i, row] of rows.entries()) {
      expect(Buffer.from(row.text_sealed).includes(Buffer.from(pieces[i]!.slice(0, 24)))).toBe(false);
      expect(Buffer.from(row.text_sealed).includes(Buffer.from('magma'))).toBe(false);
    }
    const list = (await send(a, 'GET', '/v1/memory/collections')).body.collections[0];
    expect(list).toMatchObject({ dimensions: DIMS, documents: 1, chunks: pieces.length });
  });

  it('searches: the query embedded and billed under the key, the nearest chunks by cosine similarity, unsealed', async () => {
    const before = await balance(a);
    const query = 'sourdough starter flour dough oven';
    const r = await send(a, 'POST', `/v1/memory/collections/${mem.id}/search`, { query, k: 3 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const tokens = wordsOf(query).length;
    expect(r.body).toMatchObject({ object: 'memory.search', collection_id: mem.id, model: 'test-embed', k: 3, usage: { prompt_tokens: tokens }, cost_micro_usd: tokens * 2 });
    const results = r.body.results as Array<{ document_id: string; chunk_index: number; text: string; score: number }>;
    expect(results).toHaveLength(3);
    const pieces = chunkText(DOCUMENT);
    expect(results[0]!.text).toContain('sourdough');
    for (const hit of results) {
      expect(hit.document_id).toBe(doc.id);
      expect(hit.text).toBe(pieces[hit.chunk_index]);
    }
    // Best first, and the scores are the cosine similarities of the embedder's vectors.
    const cos = (x: number[], y: number[]) => x.reduce((s, v, i) => s + v * y[i]!, 0) / Math.hypot(...x) / Math.hypot(...y);
    const q = embed(query, DIMS);
    const expected = pieces.map((p, i) => ({ i, score: cos(embed(p, DIMS), q) })).sort((x, y) => y.score - x.score);
    expect(results.map((h) => h.chunk_index)).toEqual(expected.slice(0, 3).map((e) => e.i));
    for (const [n, hit] of results.entries()) expect(hit.score).toBeCloseTo(expected[n]!.score, 5);
    expect(r.headers.get(RECEIPT_HEADERS.id)).toBe(r.body.receipt_id);
    expect(await balance(a)).toBe(before - tokens * 2);
    expect((await events(a)).at(-1)).toMatchObject({ request_id: r.body.receipt_id, route: 'POST /v1/memory/collections/:id/search', cost_micro_usd: tokens * 2 });
    // A second topic is found just as well.
    const tides = await send(a, 'POST', `/v1/memory/collections/${mem.id}/search`, { query: 'moon gravity and neap tides' });
    expect(tides.body.results).toHaveLength(Math.min(5, doc.chunks)); // the default k, or every chunk there is
    expect(tides.body.results[0].text).toContain('tides');
  });

  it('refuses k out of range, an empty or oversized document, naming the field, and bills nothing', async () => {
    const before = await balance(a);
    const calls = up.seen.length;
    for (const [path, body, param] of [
      ['search', { query: 'tides', k: 0 }, 'k'],
      ['search', { query: 'tides', k: 101 }, 'k'],
      ['search', { query: 'tides', k: 2.5 }, 'k'],
      ['search', { k: 3 }, 'query'],
      ['documents', { text: '' }, 'text'],
      ['documents', { text: ' \n\t ' }, 'text'],
      ['documents', { text: 'x'.repeat(100_001) }, 'text'],
    ] as const) {
      const r = await send(a, 'POST', `/v1/memory/collections/${mem.id}/${path}`, body);
      expect(r.status, `${path} ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.error).toMatchObject({ type: 'invalid_request', param });
    }
    expect(up.seen.length).toBe(calls);
    expect(await balance(a)).toBe(before);
  });

  it('searches the database by the backend: an HNSW index with pgvector (embedded), an exact scan in SQL without (this Postgres server)', async () => {
    const memory = t.gw.memory;
    const mode = await memory.vectors.mode();
    const { rows } = await sql<{ type: string }>`select format_type(atttypid, atttypmod) as type from pg_attribute where attrelid = 'memory_chunks'::regclass and attname = 'embedding'`.execute(t.gw.database.db);
    const indexes = await sql<{ indexname: string; indexdef: string }>`select indexname, indexdef from pg_indexes where tablename = 'memory_chunks' and indexname like 'memory_chunks_hnsw_%'`.execute(t.gw.database.db);
    const q = (() => {
      const v = embed('lava ash eruption', DIMS);
      const n = Math.hypot(...v);
      return v.map((x) => x / n);
    })();
    const found = await memory.vectors.search(mem.id, q, 4);
    const exact = await memory.vectors.search(mem.id, q, 4, { exact: true });
    expect(found.map((r) => [r.document_id, r.chunk_index])).toEqual(exact.map((r) => [r.document_id, r.chunk_index]));
    if (TEST_DB_KIND === 'pglite') {
      expect(mode).toBe('indexed');
      expect(rows[0]!.type).toBe('vector');
      expect(indexes.rows).toEqual([{ indexname: `memory_chunks_hnsw_${DIMS}`, indexdef: expect.stringMatching(new RegExp(`USING hnsw \\(\\(\\(embedding\\)::vector\\(${DIMS}\\)\\) vector_cosine_ops\\).*WHERE \\(dims = ${DIMS}\\)`)) }]);
    } else {
      expect(mode).toBe('exact');
      expect(rows[0]!.type).toBe('real[]');
      expect(indexes.rows).toEqual([]);
    }
  });

  it("hides a collection from another account's key (404), and its list", async () => {
    const b = await account();
    for (const [method, path, body] of [
      ['POST', `/v1/memory/collections/${mem.id}/search`, { query: 'tides' }],
      ['POST', `/v1/memory/collections/${mem.id}/documents`, { text: 'mine now' }],
      ['DELETE', `/v1/memory/collections/${mem.id}`, undefined],
    ] as const) {
      const r = await send(b, method, path, body);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.body.error.type).toBe('not_found');
    }
    expect((await send(b, 'GET', '/v1/memory/collections')).body).toEqual({ collections: [] });
    expect(await balance(b)).toBe(50_000_000);
    expect((await chunkRows(mem.id)).length).toBe(doc.chunks);
  });

  it('keeps one dimension per collection: an embedder that changes it is refused with nothing stored', async () => {
    const before = (await chunkRows(mem.id)).length;
    dims = DIMS * 2;
    try {
      const r = await send(a, 'POST', `/v1/memory/collections/${mem.id}/documents`, { text: 'A short note about tides.' });
      expect(r.status).toBe(502);
      expect(r.body.error.message).toMatch(/128 dimensions; this collection holds vectors of 64/);
    } finally {
      dims = DIMS;
    }
    expect((await chunkRows(mem.id)).length).toBe(before);
  });

  it('deletes a collection with every chunk, sealed text and vector', async () => {
    const other = await collection(a, { name: 'kept', model: 'test-embed' });
    expect((await send(a, 'POST', `/v1/memory/collections/${other.id}/documents`, { text: TOPICS.tides })).status).toBe(200);
    const r = await send(a, 'DELETE', `/v1/memory/collections/${mem.id}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: mem.id, object: 'memory.collection', deleted: true, documents_deleted: 1, chunks_deleted: doc.chunks });
    expect(await chunkRows(mem.id)).toEqual([]);
    expect(await t.gw.database.db.selectFrom('memory_collections').select('id').where('id', '=', mem.id).execute()).toEqual([]);
    expect((await send(a, 'POST', `/v1/memory/collections/${mem.id}/search`, { query: 'tides' })).status).toBe(404);
    expect((await send(a, 'DELETE', `/v1/memory/collections/${mem.id}`)).status).toBe(404);
    // The other collection is untouched; the receipts of the deleted one's embeddings stay.
    expect((await chunkRows(other.id)).length).toBe(1);
    expect(await t.gw.database.db.selectFrom('receipts').select('id').where('id', '=', doc.receipt_ids[0]!).execute()).toHaveLength(1);
    const empty = await collection(a, { name: 'empty', model: 'test-embed' });
    const calls = up.seen.length;
    const nothing = await send(a, 'POST', `/v1/memory/collections/${empty.id}/search`, { query: 'tides' });
    expect(nothing.body).toMatchObject({ results: [], cost_micro_usd: 0, receipt_id: null });
    expect(up.seen.length).toBe(calls); // an empty collection is not searched, nor is its query embedded
  });

  it("applies the key's guardrails on the embedding calls: redacted text is what is embedded and stored; a blocked document is refused with a free receipt", async () => {
    const ruleSet = async (detectors: unknown[]) => {
      const res = await a.client.raw('POST', '/v1/guardrails', { body: { detectors } });
      expect(res.status).toBe(201);
      return ((await res.json()) as { id: string }).id;
    };
    const policy = { guardrails: [await ruleSet([{ type: 'blocklist', input: 'redact', terms: ['bluebird'] }]), await ruleSet([{ type: 'blocklist', input: 'block', terms: ['Project Falcon'] }])] };
    const guarded = { ...a, api: new SvcClient({ baseUrl: t.url, credential: { kind: 'bearer', token: (await a.client.createKey({ scopes: ['memory'], policy })).key } }) };
    const c = await collection(guarded, { name: 'guarded', model: 'test-embed' });
    const stored = await send(guarded, 'POST', `/v1/memory/collections/${c.id}/documents`, { text: 'The bluebird sings at dawn over the harbour.' });
    expect(stored.status, JSON.stringify(stored.body)).toBe(200);
    const sent = up.seen.at(-1)!.body.input as string[];
    expect(sent).toHaveLength(1);
    expect(sent[0]).not.toMatch(/bluebird/i);
    const found = await send(guarded, 'POST', `/v1/memory/collections/${c.id}/search`, { query: 'harbour dawn' });
    expect(found.body.results[0].text).toBe(sent[0]);
    const before = await balance(a);
    const calls = up.seen.length;
    const blocked = await send(guarded, 'POST', `/v1/memory/collections/${c.id}/documents`, { text: 'Notes on Project Falcon and its launch.' });
    expect(blocked.status).toBe(400);
    expect(blocked.body.error).toMatchObject({ type: 'guardrail_blocked', receipt_id: expect.stringMatching(/^req_/) });
    expect(up.seen.length).toBe(calls);
    expect(await balance(a)).toBe(before);
    expect((await chunkRows(c.id)).length).toBe(1);
  });

  it('holds at most 100 collections per account, also when creations race', async () => {
    const c = await account();
    for (let i = 0; i < 95; i += 5) await Promise.all(Array.from({ length: 5 }, (_, j) => collection(c, { name: `c${i + j}`, model: 'test-embed' })));
    const race = await Promise.all(Array.from({ length: 10 }, (_, i) => send(c, 'POST', '/v1/memory/collections', { name: `race${i}`, model: 'test-embed' })));
    expect(race.filter((r) => r.status === 201)).toHaveLength(5);
    for (const r of race.filter((x) => x.status !== 201)) expect(r).toMatchObject({ status: 409, body: { error: { type: 'conflict', reason: 'collection_limit', limit: 100 } } });
    expect((await send(c, 'GET', '/v1/memory/collections')).body.collections).toHaveLength(100);
  });
});
