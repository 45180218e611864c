import { z } from 'zod';
import { CHUNK_CHARS, CHUNK_OVERLAP } from './chunking.ts';

/** The most collections an account holds; the list is complete up to it (spec document 3). */
export const COLLECTIONS_CAP = 100;
/** The longest document one call stores, in characters (UTF-16 code units): about 143 chunks. */
export const MAX_DOCUMENT_CHARS = 100_000;
/** The most chunks one collection holds. */
export const MAX_COLLECTION_CHUNKS = 100_000;
export const MAX_QUERY_CHARS = 8_000;
export const MAX_K = 100;
export const DEFAULT_K = 5;
export const MAX_METADATA_KEYS = 16;

const Metadata = z
  .record(z.string().min(1).max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= MAX_METADATA_KEYS, `at most ${MAX_METADATA_KEYS} keys`)
  .describe(`Your own labels: up to ${MAX_METADATA_KEYS} string values (keys up to 64 characters, values up to 512), returned as given; not sealed.`);

export const CollectionInput = z.strictObject({
  name: z.string().trim().min(1).max(200),
  model: z.string().min(1).max(256).describe('An embeddings model of the catalog (GET /v1/models; a chat model is refused). Every document and query of the collection is embedded by it.'),
  metadata: Metadata.optional(),
});
export type CollectionInput = z.infer<typeof CollectionInput>;

export const CollectionParams = z.object({ id: z.string().min(1).max(64) });

export const CollectionView = z.object({
  id: z.string(),
  object: z.literal('memory.collection'),
  name: z.string(),
  model: z.string(),
  dimensions: z.number().int().nullable().describe("The embedding dimension, recorded from the collection's first stored embedding; null until then."),
  metadata: z.record(z.string(), z.string()),
  documents: z.number().int(),
  chunks: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const CollectionList = z.object({ collections: z.array(CollectionView).describe(`Newest first; complete (an account holds at most ${COLLECTIONS_CAP}).`) });

export const CollectionDeleted = z.object({
  id: z.string(),
  object: z.literal('memory.collection'),
  deleted: z.literal(true),
  documents_deleted: z.number().int(),
  chunks_deleted: z.number().int().describe('Chunks destroyed with their sealed text and vectors.'),
});

export const DocumentInput = z.strictObject({
  text: z
    .string()
    .min(1)
    .max(MAX_DOCUMENT_CHARS)
    .describe(`The document, up to ${MAX_DOCUMENT_CHARS} characters: cut into chunks of at most ${CHUNK_CHARS} characters on word boundaries, each overlapping the previous by about ${CHUNK_OVERLAP}.`),
});

const Usage = z.object({ prompt_tokens: z.number().int(), total_tokens: z.number().int() });

export const DocumentStored = z.object({
  id: z.string().describe('The document id; search results name it.'),
  object: z.literal('memory.document'),
  collection_id: z.string(),
  model: z.string(),
  dimensions: z.number().int(),
  characters: z.number().int(),
  chunks: z.number().int(),
  chunking: z.object({ size: z.number().int(), overlap: z.number().int(), unit: z.literal('characters') }),
  usage: Usage.describe('Of the embeddings call that embedded the chunks.'),
  cost_micro_usd: z.number().int(),
  receipt_ids: z.array(z.string()).describe('The signed receipts of the embeddings calls (GET /v1/receipts/:id); the last is also in the x-svc-* headers.'),
});

export const SearchInput = z.strictObject({
  query: z.string().min(1).max(MAX_QUERY_CHARS),
  k: z.number().int().min(1).max(MAX_K).default(DEFAULT_K).describe(`How many chunks to return, 1 to ${MAX_K} (default ${DEFAULT_K}).`),
});

export const SearchHit = z.object({
  document_id: z.string(),
  chunk_index: z.number().int(),
  text: z.string(),
  score: z.number().describe('Cosine similarity of the chunk and the query, -1 to 1; results are best first.'),
});

export const SearchAnswer = z.object({
  object: z.literal('memory.search'),
  collection_id: z.string(),
  model: z.string(),
  k: z.number().int(),
  results: z.array(SearchHit),
  usage: Usage.describe('Of the embeddings call that embedded the query (zeros when the collection holds nothing and no call was made).'),
  cost_micro_usd: z.number().int(),
  receipt_id: z.string().nullable().describe('The signed receipt of the query embedding; null when no call was made.'),
});
