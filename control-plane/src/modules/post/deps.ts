import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { MarketConfig } from '../../config/market.ts';
import type { BillingConfig } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import type { Cursors } from '../../http/cursor.ts';
import type { IdentityService } from '../identity/service.ts';
import type { Metering } from '../money/metering.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { Transfers } from '../money/transfer.ts';
import type { PassportsService } from '../passports/service.ts';
import { PostService } from './service.ts';
import { PostSettings } from './settings.ts';

/** Wires Agent Post: settings, and the postage moved through the money module's transfers. */
export function createPost(d: {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  signer: ReceiptSigner;
  billing: BillingConfig;
  metering: Metering;
  cursors: Cursors;
  identity: Pick<IdentityService, 'lockAccount'>;
  passports: Pick<PassportsService, 'store'>;
  config: MarketConfig;
  publicUrl: URL;
}): PostService {
  const transfers = new Transfers({ db: d.db, clock: d.clock, signer: d.signer, billing: d.billing, metering: d.metering });
  return new PostService({ ...d, settings: new PostSettings(d.db, d.clock), transfers });
}
