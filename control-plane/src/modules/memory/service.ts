import type { Kysely } from 'kysely';
import { Sealer, ServiceError, invalid, newId, notFound, type Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { KeyPrincipal } from '../../http/auth-types.ts';
import type { CallerSignal } from '../../http/caller-signal.ts';
import { assertModelAllowed } from '../../http/key-bounds.ts';
import { CHUNK_CHARS, CHUNK_OVERLAP, chunkText } from './chunking.ts';
import { embedUnderKey, type EmbedDeps } from './embed.ts';
import { COLLECTIONS_CAP, MAX_COLLECTION_CHUNKS, type CollectionInput } from './schemas.ts';
import { countCollections, deleteCollection, insertCollection, listCollections, lockAccount, ownedCollection, recordDocument, type CollectionRow } from './store.ts';
import { MAX_DIMS, VectorStore, unit, type VectorMode } from './vectors.ts';

export interface MemoryDeps {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  embed: EmbedDeps;
}

/** The request a memory call's embeddings are made for: its route (usage event and receipt), run id and caller. */
export interface MemoryCall {
  route: string;
  runId: string | null;
  signal: CallerSignal;
}

export const DOCUMENTS_ROUTE = 'POST /v1/memory/collections/:id/documents';
export const SEARCH_ROUTE = 'POST /v1/memory/collections/:id/search';

const collectionNotFound = () => notFound('Memory collection');
const aad = (collectionId: string, documentId: string, index: number) => `memory:${collectionId}:${documentId}:${index}`;

/**
 * Memory collections: documents are cut into chunks, each chunk embedded by the collection's model through
 * the metered inference path under the caller's key, its text sealed at rest and its vector stored for
 * search; a search embeds the query the same way and returns the nearest chunks, unsealed.
 */
export class MemoryService {
  readonly vectors: VectorStore;
  private readonly sealer: Sealer;

  constructor(private readonly d: MemoryDeps) {
    this.vectors = new VectorStore(d.db);
    this.sealer = new Sealer(d.sealKey);
  }

  /** Reads how vectors are searched in this database, for the boot log. */
  async start(log: (msg: string) => void): Promise<VectorMode> {
    const mode = await this.vectors.mode();
    if (mode === 'indexed') log(`memory: vector search by HNSW index (pgvector ${(await this.vectors.extensionVersion()) ?? '?'})`);
    else log('memory: pgvector is not available in this database; vector search is an exact scan in SQL (docs/memory.md)');
    return mode;
  }

  /** Refuses (400 naming `model`) a model that is not an embeddings model of the catalog. */
  private async embeddingModel(p: KeyPrincipal, model: string): Promise<void> {
    try {
      await this.d.embed.inference.catalog.resolve(model, 'embeddings');
    } catch (e) {
      if (e instanceof ServiceError && (e.type === 'not_found' || e.type === 'invalid_request')) throw invalid(`model: ${e.message}`, 'model');
      throw e;
    }
    assertModelAllowed(p, model);
  }

  async create(p: KeyPrincipal, input: CollectionInput) {
    await this.embeddingModel(p, input.model);
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      await lockAccount(trx, p.accountId);
      const n = await countCollections(trx, p.accountId);
      if (n >= COLLECTIONS_CAP) throw new ServiceError('conflict', `An account holds at most ${COLLECTIONS_CAP} memory collections and this one holds ${n}; delete one first`, { reason: 'collection_limit', limit: COLLECTIONS_CAP });
      return insertCollection(trx, { id: newId('mem_'), account_id: p.accountId, name: input.name, model: input.model, dimensions: null, metadata: JSON.stringify(input.metadata ?? {}), created_at: now, updated_at: now });
    });
    return view(row);
  }

  async list(accountId: string) {
    return { collections: (await listCollections(this.d.db, accountId, COLLECTIONS_CAP)).map(view) };
  }

  async remove(accountId: string, id: string) {
    const r = await deleteCollection(this.d.db, accountId, id);
    if (!r) throw collectionNotFound();
    return { id, object: 'memory.collection' as const, deleted: true as const, documents_deleted: r.documents, chunks_deleted: r.chunks };
  }

  private async owned(accountId: string, id: string): Promise<CollectionRow> {
    const c = await ownedCollection(this.d.db, accountId, id);
    if (!c) throw collectionNotFound();
    return c;
  }

  private full(c: Pick<CollectionRow, 'chunks'>, adding: number): void {
    if (c.chunks + adding > MAX_COLLECTION_CHUNKS) {
      throw new ServiceError('conflict', `A memory collection holds at most ${MAX_COLLECTION_CHUNKS} chunks; this one holds ${c.chunks} and the document makes ${adding}`, { reason: 'collection_full', limit: MAX_COLLECTION_CHUNKS });
    }
  }

  /** Unit vectors of one dimension that a collection of `dims` (null: none yet) can store; else 502 (the call was billed, nothing is stored). */
  private usable(vectors: number[][], dims: number | null): number[][] {
    const got = vectors[0]!.length;
    if (dims !== null && got !== dims) throw new ServiceError('upstream_error', `The embeddings model answered with ${got} dimensions; this collection holds vectors of ${dims}`);
    if (got > MAX_DIMS) throw new ServiceError('upstream_error', `The embeddings model answered with ${got} dimensions; memory stores at most ${MAX_DIMS}`);
    return vectors.map((v) => {
      const u = unit(v);
      if (!u) throw new ServiceError('upstream_error', 'The embeddings model answered with a zero vector, which has no direction to search by');
      return u;
    });
  }

  /** Chunks, embeds (billed under the key) and stores a document; all of its chunks or none. */
  async addDocument(p: KeyPrincipal, id: string, text: string, call: MemoryCall) {
    const c = await this.owned(p.accountId, id);
    const pieces = chunkText(text);
    if (pieces.length === 0) throw invalid('text: holds nothing but whitespace', 'text');
    this.full(c, pieces.length);
    const e = await embedUnderKey(this.d.embed, p, c.model, pieces, call);
    const vectors = this.usable(e.vectors, c.dimensions);
    const dims = vectors[0]!.length;
    await this.vectors.ensureIndex(dims);
    const documentId = newId('doc_');
    const now = this.d.clock.now();
    const row = await this.d.db.transaction().execute(async (trx) => {
      // The collection's row, locked: a concurrent delete waits, or already happened (404, nothing written).
      const locked = await ownedCollection(trx, p.accountId, id, true);
      if (!locked) throw collectionNotFound();
      this.usable(vectors, locked.dimensions);
      this.full(locked, pieces.length);
      await this.vectors.insert(
        trx,
        vectors.map((vector, i) => ({ collection_id: id, document_id: documentId, chunk_index: i, text_sealed: this.sealer.seal(e.texts[i]!, aad(id, documentId, i)), vector })),
      );
      return recordDocument(trx, id, dims, pieces.length, now);
    });
    return {
      id: documentId,
      object: 'memory.document' as const,
      collection_id: id,
      model: row.model,
      dimensions: dims,
      characters: text.length,
      chunks: pieces.length,
      chunking: { size: CHUNK_CHARS, overlap: CHUNK_OVERLAP, unit: 'characters' as const },
      usage: { prompt_tokens: e.promptTokens, total_tokens: e.promptTokens },
      cost_micro_usd: e.costMicroUsd,
      receipt_ids: [e.requestId],
      receipt: e.receipt,
    };
  }

  /** The k chunks nearest to the query (embedded and billed under the key), best first, unsealed. */
  async search(p: KeyPrincipal, id: string, query: string, k: number, call: MemoryCall) {
    const c = await this.owned(p.accountId, id);
    const base = { object: 'memory.search' as const, collection_id: id, model: c.model, k };
    // An empty collection answers at once: nothing to find, so no query embedding is made or billed.
    if (c.chunks === 0 || c.dimensions === null) return { ...base, results: [], usage: { prompt_tokens: 0, total_tokens: 0 }, cost_micro_usd: 0, receipt_id: null, receipt: null };
    const e = await embedUnderKey(this.d.embed, p, c.model, [query], call);
    const [q] = this.usable(e.vectors, c.dimensions);
    const rows = await this.vectors.search(id, q!, k);
    return {
      ...base,
      results: rows.map((r) => ({ document_id: r.document_id, chunk_index: r.chunk_index, text: this.sealer.open(r.text_sealed, aad(id, r.document_id, r.chunk_index)).toString('utf8'), score: 1 - Number(r.distance) })),
      usage: { prompt_tokens: e.promptTokens, total_tokens: e.promptTokens },
      cost_micro_usd: e.costMicroUsd,
      receipt_id: e.requestId,
      receipt: e.receipt,
    };
  }
}

function view(r: CollectionRow) {
  return {
    id: r.id,
    object: 'memory.collection' as const,
    name: r.name,
    model: r.model,
    dimensions: r.dimensions,
    metadata: r.metadata,
    documents: r.documents,
    chunks: r.chunks,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}
