import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { DB } from '../../db/schema.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import type { HealthService } from '../platform/health.ts';
import type { Anchors } from '../anchors/service.ts';

export interface ProofsDeps {
  db: Kysely<DB>;
  clock: Clock;
  signer: ReceiptSigner;
  health: HealthService;
  publicUrl: URL;
  anchors: Anchors;
}

/** The public origin (and any path prefix) without a trailing slash, for absolute links. */
export const publicBase = (u: URL) => u.href.replace(/\/+$/, '');
