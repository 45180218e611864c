import { intWithDefault } from './parse.ts';

/**
 * Files and batches (`/v1/files`, `/v1/batches`). Uploaded content is sealed at rest and destroyed at its
 * hard TTL (SVC_FILE_TTL_SECONDS) or when the batch it feeds ends. Batch lines run on the leader's loop
 * through the metered inference service; SVC_BATCH_DISCOUNT_PERCENT lowers every line's hold and charge.
 */
export interface BatchesConfig {
  /** Hard TTL of a file's content, from its creation. */
  fileTtlSeconds: number;
  /** Largest accepted upload (the file part); 413 above it. */
  fileMaxBytes: number;
  /** Most lines one batch input file may hold. */
  maxLines: number;
  /** Deployment discount on batch lines, 0-100 percent of the list price. */
  discountPercent: number;
  /** Lines of one batch run at the same time. */
  concurrency: number;
  /** Lines the loop starts per batch per tick, so batches take turns. */
  linesPerTick: number;
  /** Batches the loop runs lines of per tick, taken in turn across accounts (cancelled and expired ones end besides). */
  batchesPerTick: number;
}

export const batchesEnv = {
  // At least an hour: a batch's window ends a minute before its input file's TTL (INPUT_MARGIN_MS), so a
  // shorter TTL would leave batches no time to run (60 s: none at all).
  SVC_FILE_TTL_SECONDS: intWithDefault(7 * 24 * 3600, 3600, 365 * 24 * 3600),
  SVC_FILE_MAX_BYTES: intWithDefault(100 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
  SVC_BATCH_MAX_LINES: intWithDefault(50_000, 1, 1_000_000),
  SVC_BATCH_DISCOUNT_PERCENT: intWithDefault(0, 0, 100),
  SVC_BATCH_CONCURRENCY: intWithDefault(4, 1, 64),
  SVC_BATCH_LINES_PER_TICK: intWithDefault(200, 1, 100_000),
  SVC_BATCH_BATCHES_PER_TICK: intWithDefault(200, 1, 100_000),
};

export function batchesConfig(e: {
  SVC_FILE_TTL_SECONDS: number;
  SVC_FILE_MAX_BYTES: number;
  SVC_BATCH_MAX_LINES: number;
  SVC_BATCH_DISCOUNT_PERCENT: number;
  SVC_BATCH_CONCURRENCY: number;
  SVC_BATCH_LINES_PER_TICK: number;
  SVC_BATCH_BATCHES_PER_TICK: number;
}): BatchesConfig {
  return {
    fileTtlSeconds: e.SVC_FILE_TTL_SECONDS,
    fileMaxBytes: e.SVC_FILE_MAX_BYTES,
    maxLines: e.SVC_BATCH_MAX_LINES,
    discountPercent: e.SVC_BATCH_DISCOUNT_PERCENT,
    concurrency: e.SVC_BATCH_CONCURRENCY,
    linesPerTick: e.SVC_BATCH_LINES_PER_TICK,
    batchesPerTick: e.SVC_BATCH_BATCHES_PER_TICK,
  };
}
