import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { BatchesConfig } from '../../config/batches.ts';
import type { DB } from '../../db/schema.ts';
import { FilesService } from '../files/service.ts';
import type { InferenceService } from '../inference/service.ts';
import type { KeysService } from '../keys/service.ts';
import { LineStore } from './lines.ts';
import { BatchRunner } from './runner.ts';
import { BatchesService } from './service.ts';

export interface BatchDeps {
  files: FilesService;
  batches: BatchesService;
  runner: BatchRunner;
}

/** Wires files and batches: the services behind the routes and the runner the leader's loop drives. */
export function createBatches(
  cfg: BatchesConfig,
  d: { db: Kysely<DB>; clock: Clock; sealKey: Uint8Array; processes: { processId: string; alive: (ids: readonly string[]) => Promise<Set<string>> }; keys: KeysService; inference: InferenceService; publicUrl: URL; holdTtlSeconds: number; log: { error(obj: object, msg: string): void } },
): BatchDeps {
  const files = new FilesService(d.db, d.clock, d.sealKey, cfg, d.processes);
  const batches = new BatchesService(d.db, d.clock, files);
  const runner = new BatchRunner({
    db: d.db,
    clock: d.clock,
    files,
    lines: new LineStore(d.db, d.clock, d.sealKey),
    inference: d.inference,
    principalOf: (keyId) => d.keys.principalOf(keyId),
    cfg,
    leaseMs: d.holdTtlSeconds * 1000,
    publicUrl: d.publicUrl,
    log: d.log,
  });
  return { files, batches, runner };
}
