import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { requireKey } from '../../http/auth.ts';
import { callerGone } from '../../http/caller-signal.ts';
import { setReceiptHeaders } from '../../http/receipt-headers.ts';
import { runIdOf } from '../../http/run-id.ts';
import { CHUNK_CHARS, CHUNK_OVERLAP } from './chunking.ts';
import { COLLECTIONS_CAP, CollectionDeleted, CollectionInput, CollectionList, CollectionParams, CollectionView, DocumentInput, DocumentStored, MAX_COLLECTION_CHUNKS, MAX_DOCUMENT_CHARS, SearchAnswer, SearchInput } from './schemas.ts';
import { DOCUMENTS_ROUTE, SEARCH_ROUTE, type MemoryService } from './service.ts';

/** Semantic memory collections (spec: agents area), API key routes under the `memory` scope. */
export function memoryRoutes(app: FastifyInstance, memory: MemoryService): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['memory'];
  const config = { auth: 'key' as const, scope: 'memory' as const };
  const billable = { ...config, billable: true as const };

  r.post(
    '/v1/memory/collections',
    {
      config,
      schema: {
        tags,
        summary: `Create a memory collection: a name, metadata and the catalog embeddings model its documents and queries are embedded by; at most ${COLLECTIONS_CAP} per account`,
        body: CollectionInput,
        response: { 201: CollectionView },
      },
    },
    async (req, reply) => reply.code(201).send(await memory.create(requireKey(req), req.body)),
  );

  r.get(
    '/v1/memory/collections',
    { config, schema: { tags, summary: `Your memory collections, newest first; complete (at most ${COLLECTIONS_CAP})`, response: { 200: CollectionList } } },
    async (req) => memory.list(requireKey(req).accountId),
  );

  r.delete(
    '/v1/memory/collections/:id',
    { config, schema: { tags, summary: 'Delete a collection and destroy its chunks: sealed texts and vectors (receipts of its embeddings stay)', params: CollectionParams, response: { 200: CollectionDeleted } } },
    async (req) => memory.remove(requireKey(req).accountId, req.params.id),
  );

  r.post(
    '/v1/memory/collections/:id/documents',
    {
      config: billable,
      schema: {
        tags,
        summary: `Store a document (up to ${MAX_DOCUMENT_CHARS} characters): cut into chunks of at most ${CHUNK_CHARS} characters with about ${CHUNK_OVERLAP} of overlap, embedded by the collection's model in one metered embeddings call under this key (billed as embedding usage, with a signed receipt), each chunk's text sealed at rest with its vector; all chunks or none; a collection holds at most ${MAX_COLLECTION_CHUNKS} chunks`,
        params: CollectionParams,
        body: DocumentInput,
        response: { 200: DocumentStored },
      },
    },
    async (req, reply) => {
      const { receipt, ...out } = await memory.addDocument(requireKey(req), req.params.id, req.body.text, { route: DOCUMENTS_ROUTE, runId: runIdOf(req), signal: callerGone(reply.raw) });
      setReceiptHeaders(reply, receipt);
      return out;
    },
  );

  r.post(
    '/v1/memory/collections/:id/search',
    {
      config: billable,
      schema: {
        tags,
        summary: "Semantic search: the query embedded by the collection's model (a metered embeddings call under this key, with a signed receipt), the k chunks of highest cosine similarity returned best first with their text, document id and chunk index",
        params: CollectionParams,
        body: SearchInput,
        response: { 200: SearchAnswer },
      },
    },
    async (req, reply) => {
      const { receipt, ...out } = await memory.search(requireKey(req), req.params.id, req.body.query, req.body.k, { route: SEARCH_ROUTE, runId: runIdOf(req), signal: callerGone(reply.raw) });
      if (receipt) setReceiptHeaders(reply, receipt);
      return out;
    },
  );
}
