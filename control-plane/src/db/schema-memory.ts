import type { ColumnType, Generated } from 'kysely';

/**
 * Memory collections (memory module): a name, metadata, and the catalog embeddings model whose vectors the
 * collection holds. `dimensions` is recorded from the first embedding stored (every later one must match);
 * `documents` and `chunks` count what it holds.
 */
export interface MemoryCollectionsTable {
  id: string;
  /** Insertion order: lists are newest first. */
  seq: Generated<number>;
  account_id: string;
  name: string;
  model: string;
  dimensions: number | null;
  metadata: ColumnType<Record<string, string>, string, string>;
  documents: Generated<number>;
  chunks: Generated<number>;
  created_at: Date;
  updated_at: Date;
}

/**
 * One chunk of a stored document: its text sealed (AES-256-GCM, bound to collection, document and position)
 * and its unit-length embedding. `embedding` is a pgvector `vector` where the database has the extension, a
 * `real[]` where it has not (the exact-scan fallback); the store writes and reads it as text either way.
 * Deleting the collection deletes its chunks (a cascading foreign key, and the service deletes them first).
 */
export interface MemoryChunksTable {
  collection_id: string;
  document_id: string;
  chunk_index: number;
  dims: number;
  text_sealed: Uint8Array;
  embedding: string;
}
