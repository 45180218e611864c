import type { Generated } from 'kysely';
import type { Json } from './schema-json.ts';

/**
 * Video jobs (media module); no prompt is stored. The file is in `video_chunks` (`content_chunks` of them,
 * db/sealed-chunks.ts), or for jobs finished before chunks in `content_sealed` (aad = job id), until destroyed.
 */
export interface VideoJobsTable {
  id: string;
  account_id: string;
  key_id: string;
  request_id: string;
  model: string;
  provider: string;
  seconds: number;
  max_seconds: number;
  price_micro_usd_per_second: number;
  size: string;
  image_input: Generated<boolean>;
  upstream_id: string | null;
  status: 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled' | 'expired';
  progress: Generated<number>;
  /** The open hold (money module's Hold), null once settled or released. */
  hold: Json<Record<string, unknown>> | null;
  hold_micro_usd: number;
  cost_micro_usd: number | null;
  billed: Generated<boolean>;
  duration_seconds: number | null;
  /** The signed receipt: {payload, canonical, hash, signature}. */
  receipt: Json<Record<string, unknown>> | null;
  manifest: Json<Record<string, unknown>> | null;
  manifest_signature: string | null;
  asset_sha256: string | null;
  content_bytes: number | null;
  content_sealed: Uint8Array | null;
  content_chunks: number | null;
  error: Json<{ type: string; message: string }> | null;
  lock_token: string | null;
  locked_until: Date | null;
  deadline_at: Date;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  expires_at: Date | null;
  content_destroyed_at: Date | null;
}
