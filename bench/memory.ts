/**
 * Memory search bench: the database part of POST /v1/memory/collections/:id/search (the nearest-k query of the
 * memory module's vector store and the unsealing of the k texts; not the query's embedding call) over one
 * collection of 10,000 and then 100,000 stored chunks with random unit vectors of the collection's dimension,
 * each size searched two ways in the same run, on the same vectors and the same queries:
 *   1. index: the HNSW index (pgvector, cosine) the store searches by, at the store's ef_search and others;
 *   2. exact: every chunk of the collection scanned and sorted (the same pgvector distance, no index),
 * with p50 and p99 of each, and recall@10 of the index against the exact answer.
 * Vectors are drawn `--data clustered` (default: unit vectors around 1,000 random centres, as embeddings of
 * texts on many topics are) or `--data uniform` (uniform on the sphere: no neighbourhood structure at all, the
 * worst case for any approximate index). The index is built once the chunks of a size are stored (the
 * store's own ensureIndex; maintenance_work_mem raised for the build), and its build time is printed.
 * On a server without pgvector (`--pg URL`) only the exact scan exists and is measured.
 *
 *   npx tsx bench/memory.ts [--sizes 10000,100000] [--dims 384] [--queries 100] [--k 10] [--ef 40,100,200] [--data clustered|uniform] [--pg URL]
 * Target (embedded database, index): p50 under 20 ms at 100,000 chunks with recall@10 >= 0.95.
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import pg from 'pg';
import { Sealer, newId } from '@svc/shared';
import { openDatabase } from '../control-plane/src/db/database.ts';
import { migrateToLatest } from '../control-plane/src/db/migrate.ts';
import { HNSW, VectorStore, unit } from '../control-plane/src/modules/memory/vectors.ts';
import { arg } from './args.ts';
import { percentile } from './load.ts';

const SIZES = arg('sizes', '10000,100000').split(',').map(Number);
const DIMS = Number(arg('dims', '384'));
const QUERIES = Number(arg('queries', '100'));
const K = Number(arg('k', '10'));
const EFS = [...new Set([HNSW.efSearch, ...arg('ef', '40,100,200').split(',').map(Number)])].sort((a, b) => a - b);
const DATA = arg('data', 'clustered');
const PG = arg('pg', '');
const TARGET_P50_MS = 20;
const TARGET_RECALL = 0.95;

// A seeded generator, so runs draw the same vectors.
let seed = 0x9e3779b9;
const rand = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
};
const gauss = () => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
const sphere = () => unit(Array.from({ length: DIMS }, gauss))!;
const centres = Array.from({ length: 1000 }, sphere);
/** A unit vector: around a random centre (noise of norm ~0.7: cosine ~0.8 to it), or uniform. */
const draw = (): number[] => {
  if (DATA === 'uniform') return sphere();
  const c = centres[Math.floor(rand() * centres.length)]!;
  return unit(c.map((x) => x + (gauss() * 0.7) / Math.sqrt(DIMS)))!;
};
const round = (v: number[]) => v.map((x) => Math.fround(x)); // as stored (float4)

/** `--pg URL`: a database of its own on that server, created here and dropped at the end. */
const scratch = PG ? `svc_bench_memory_${newId('', 8)}` : '';
const onServer = async (q: string) => {
  const c = new pg.Client({ connectionString: PG });
  await c.connect();
  await c.query(q).finally(() => c.end());
};
if (PG) await onServer(`create database ${scratch}`);
const database = await openDatabase(PG ? { databaseUrl: Object.assign(new URL(PG), { pathname: `/${scratch}` }).toString() } : { memory: true });
const { db } = database;
await migrateToLatest(db);
const store = new VectorStore(db);
const mode = await store.mode();
const sealer = new Sealer(new Uint8Array(32).fill(7));
const account = newId('acct_');
const collection = newId('mem_');
const now = new Date();
await db.insertInto('accounts').values({ id: account, created_at: now, suspended_at: null, suspended_reason: null }).execute();
await db.insertInto('memory_collections').values({ id: collection, account_id: account, name: 'bench', model: 'bench-embed', dimensions: DIMS, metadata: '{}', created_at: now, updated_at: now }).execute();
console.log(`memory search bench: ${database.kind}, ${mode === 'indexed' ? `pgvector ${await store.extensionVersion()}` : 'no pgvector (exact scan in SQL)'}, ${DIMS} dimensions, ${DATA} vectors, ${QUERIES} queries, k=${K}, HNSW m=${HNSW.m} ef_construction=${HNSW.efConstruction}, store ef_search=${HNSW.efSearch}`);

const aad = (doc: string, i: number) => `memory:${collection}:${doc}:${i}`;
/** What the search route does with the database: the k nearest, their texts unsealed. */
async function search(q: number[], opts: { exact?: boolean; efSearch?: number }) {
  const rows = await store.search(collection, q, K, opts);
  return rows.map((r) => ({ id: `${r.document_id}:${r.chunk_index}`, text: sealer.open(r.text_sealed, aad(r.document_id, r.chunk_index)).toString('utf8') }));
}

async function timed(queries: number[][], opts: { exact?: boolean; efSearch?: number }) {
  for (const q of queries.slice(0, 5)) await search(q, opts); // warm-up
  const ms: number[] = [];
  const ids: string[][] = [];
  for (const q of queries) {
    const t = performance.now();
    const r = await search(q, opts);
    ms.push(performance.now() - t);
    ids.push(r.map((x) => x.id));
  }
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), ids };
}

const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const table: string[][] = [];
let stored = 0;
let doc = 0;
for (const size of SIZES) {
  // The index is dropped while chunks are added, then built whole (as the store builds it) over them.
  if (mode === 'indexed') await sql.raw(`drop index if exists memory_chunks_hnsw_${DIMS}`).execute(db);
  const t0 = performance.now();
  while (stored < size) {
    const documentId = `doc_${doc++}`;
    const n = Math.min(1000, size - stored);
    const rows = Array.from({ length: n }, (_, i) => ({ collection_id: collection, document_id: documentId, chunk_index: i, text_sealed: sealer.seal(`chunk ${i} of ${documentId}`, aad(documentId, i)), vector: round(draw()) }));
    await store.insert(db, rows);
    stored += n;
  }
  await sql`analyze memory_chunks`.execute(db);
  const insertS = (performance.now() - t0) / 1000;
  let buildS = 0;
  if (mode === 'indexed') {
    await sql.raw(`set maintenance_work_mem = '1GB'`).execute(db);
    const t1 = performance.now();
    await new VectorStore(db).ensureIndex(DIMS);
    buildS = (performance.now() - t1) / 1000;
    await sql.raw('reset maintenance_work_mem').execute(db);
  }
  console.log(`${size} chunks: stored in ${insertS.toFixed(1)} s${mode === 'indexed' ? `, index built in ${buildS.toFixed(1)} s` : ''}`);
  const queries = Array.from({ length: QUERIES }, () => round(draw()));
  const exact = await timed(queries, { exact: true });
  table.push([String(size), 'exact scan', '-', fmt(exact.p50), fmt(exact.p99), '1.000', '1.00x']);
  console.log(`  exact scan: p50 ${fmt(exact.p50)} ms, p99 ${fmt(exact.p99)} ms`);
  if (mode !== 'indexed') continue;
  for (const ef of EFS) {
    const idx = await timed(queries, { efSearch: ef });
    let hit = 0;
    idx.ids.forEach((r, i) => (hit += r.filter((x) => exact.ids[i]!.includes(x)).length));
    const recall = hit / (K * queries.length);
    const row = [String(size), `index${ef === HNSW.efSearch ? ' (store default)' : ''}`, String(ef), fmt(idx.p50), fmt(idx.p99), recall.toFixed(3), `${(exact.p50 / idx.p50).toFixed(1)}x`];
    table.push(row);
    console.log(`  index ef_search=${ef}: p50 ${fmt(idx.p50)} ms, p99 ${fmt(idx.p99)} ms, recall@${K} ${recall.toFixed(3)}`);
    if (size === Math.max(...SIZES) && ef === HNSW.efSearch) {
      const ok = idx.p50 < TARGET_P50_MS && recall >= TARGET_RECALL;
      console.log(`  target (p50 < ${TARGET_P50_MS} ms, recall@10 >= ${TARGET_RECALL}) at the store's ef_search: ${ok ? 'met' : 'NOT met'}`);
    }
  }
}

console.log(`\n| chunks | search | ef_search | p50 ms | p99 ms | recall@${K} | exact p50 / this p50 |`);
console.log('|---|---|---|---|---|---|---|');
for (const r of table) console.log(`| ${r.join(' | ')} |`);
await database.close();
if (PG) await onServer(`drop database ${scratch} with (force)`);
