import type { Kysely } from 'kysely';
import { Sealer, type Clock } from '@svc/shared';
import type { BillingConfig } from '../../config.ts';
import type { MediaConfig } from '../../config/media.ts';
import type { DB } from '../../db/schema.ts';
import { Metering, type BalanceObservation } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import type { InferenceService } from '../inference/service.ts';
import { MediaCatalog } from './catalog.ts';
import { ImageService } from './images.ts';
import { MediaClient } from './upstream.ts';
import { VideoService } from './videos.ts';

export interface Media {
  config: MediaConfig;
  catalog: MediaCatalog;
  images: ImageService;
  videos: VideoService;
  signer: ReceiptSigner;
  inference: InferenceService;
  publicUrl: URL;
  clock: Clock;
  /** The leader's loop: follow open renders, then expire due files. */
  loop(log?: (err: unknown, id: string) => void): Promise<void>;
}

/**
 * Wires the media module. Video holds use a Metering of their own whose hold TTL outlasts the render time
 * limit (the shared one's TTL suits requests that finish while the caller waits); it is the same money
 * path (same functions, same tables), and it reports balances to the same observers.
 */
export function createMedia(d: {
  config: MediaConfig;
  billing: BillingConfig;
  db: Kysely<DB>;
  clock: Clock;
  metering: Metering;
  signer: ReceiptSigner;
  sealKey: Uint8Array;
  inference: InferenceService;
  publicUrl: URL;
  observeBalance?: (o: BalanceObservation) => unknown;
}): Media {
  const catalog = new MediaCatalog(d.config, d.clock);
  const client = new MediaClient(d.config.timeoutMs, d.config.maxAssetBytes);
  const holdTtlSeconds = Math.max(d.billing.holdTtlSeconds, d.config.video.renderTimeoutSeconds + 2 * Math.ceil(d.config.timeoutMs / 1000) + 600);
  const videoMetering = new Metering(d.db, d.clock, d.signer, { ...d.billing, holdTtlSeconds });
  if (d.observeBalance) videoMetering.onBalance(d.observeBalance);
  const videos = new VideoService({ db: d.db, clock: d.clock, catalog, client, metering: videoMetering, signer: d.signer, sealer: new Sealer(d.sealKey), cfg: d.config });
  return {
    config: d.config,
    catalog,
    images: new ImageService(catalog, client, d.metering, d.signer, d.clock),
    videos,
    signer: d.signer,
    inference: d.inference,
    publicUrl: d.publicUrl,
    clock: d.clock,
    async loop(log) {
      await videos.jobs.pollOpen(log);
      await videos.jobs.expireDue();
    },
  };
}
