import type { BillingConfig } from '../../config.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import { Transfers } from '../money/transfer.ts';
import { PostService, type PostDeps } from './service.ts';
import { PostSettings } from './settings.ts';

/** Wires Agent Post: settings, and the postage moved through the money module's transfers. */
export function createPost(d: Omit<PostDeps, 'settings' | 'transfers'> & { signer: ReceiptSigner; billing: BillingConfig }): PostService {
  const transfers = new Transfers({ db: d.db, clock: d.clock, signer: d.signer, billing: d.billing, metering: d.metering });
  return new PostService({ ...d, settings: new PostSettings(d.db, d.clock), transfers });
}
