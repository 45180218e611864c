import type { Generated } from 'kysely';
import type { Json } from './schema-json.ts';

/**
 * Uploaded and batch-written files (files module). The content is in `file_chunks` (`content_chunks` of them,
 * db/sealed-chunks.ts), or for files written before chunks in `content` (sealed, aad = id); both null once destroyed.
 */
export interface FilesTable {
  n: Generated<number>;
  id: string;
  account_id: string;
  key_id: string | null;
  purpose: 'batch' | 'batch_output';
  filename: string;
  bytes: number;
  /** Batch input: line count and the distinct line urls, checked against a batch's endpoint. */
  lines: number | null;
  endpoints: Json<string[]> | null;
  content: Uint8Array | null;
  content_chunks: number | null;
  /** The batch this input feeds (one batch per file), or the batch that wrote this output. */
  batch_id: string | null;
  created_at: Date;
  expires_at: Date;
  content_destroyed_at: Date | null;
  content_destroyed_reason: 'deleted' | 'expired' | 'batch_ended' | null;
  deleted_at: Date | null;
}

/** Uploads in progress (files module): their chunks are in `file_chunks` before their `files` row exists. */
export interface FileUploadsTable {
  file_id: string;
  /** The process receiving it (Database.processId): when it is gone, so is the upload. */
  process_id: string;
  started_at: Date;
}

/** `file_chunks` and `video_chunks` (db/sealed-chunks.ts): sealed content, one row per chunk of at most 4 MiB. */
export interface ChunksTable {
  owner_id: string;
  seq: number;
  last: boolean;
  content: Uint8Array;
}

export type BatchStatus = 'validating' | 'in_progress' | 'finalizing' | 'completed' | 'failed' | 'expired' | 'cancelling' | 'cancelled';

/** Batches (batches module): run under the key that created them, line by line, on the leader's loop. */
export interface BatchesTable {
  n: Generated<number>;
  id: string;
  account_id: string;
  key_id: string;
  endpoint: string;
  input_file_id: string;
  completion_window: string;
  status: BatchStatus;
  metadata: Json<Record<string, string>> | null;
  errors: Json<Array<{ code: string; message: string; param: string | null; line: number | null }>> | null;
  total: number;
  completed: Generated<number>;
  failed: Generated<number>;
  output_file_id: string | null;
  error_file_id: string | null;
  created_at: Date;
  expires_at: Date;
  in_progress_at: Date | null;
  finalizing_at: Date | null;
  completed_at: Date | null;
  failed_at: Date | null;
  expired_at: Date | null;
  cancelling_at: Date | null;
  cancelled_at: Date | null;
}

/** One row per claimed line while its batch runs (deleted when it ends); `output` is the sealed answer (aad = request id). */
export interface BatchLinesTable {
  batch_id: string;
  line: number;
  custom_id: string;
  request_id: string;
  attempt: Generated<number>;
  status: 'running' | 'succeeded' | 'failed';
  status_code: number | null;
  output: Uint8Array | null;
  claimed_at: Date;
  ended_at: Date | null;
}
