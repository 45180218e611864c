import type { Kysely } from 'kysely';
import type { Clock } from '@svc/shared';
import type { MarketConfig } from '../../config/market.ts';
import type { DB } from '../../db/schema.ts';
import type { Agents } from '../agents/create.ts';
import type { IdentityService } from '../identity/service.ts';
import type { ReceiptSigner } from '../money/signer.ts';
import type { PassportsService } from '../passports/service.ts';
import type { SelfAddress } from '../webhooks/url.ts';
import { Invoker } from './invoke.ts';
import { ServicesService } from './service.ts';
import { Terms } from './terms.ts';

export interface Services {
  service: ServicesService;
  invoker: Invoker;
}

/**
 * Wires the marketplace: terms and the facilitator only where SVC_MARKET_X402 is configured, and only there
 * are the x402 libraries loaded (x402.ts).
 */
export async function createServices(d: {
  db: Kysely<DB>;
  clock: Clock;
  sealKey: Uint8Array;
  signer: ReceiptSigner;
  identity: Pick<IdentityService, 'accountOfWallet' | 'lockAccount'>;
  passports: Pick<PassportsService, 'store'>;
  agents: Agents;
  config: MarketConfig;
  self: SelfAddress;
  publicUrl: URL;
}): Promise<Services> {
  const x = d.config.x402;
  const x402 = x ? await import('./x402.ts') : null;
  const terms = x && x402 ? new Terms(x, d.publicUrl, d.config.paymentWindowSeconds, x402.v1Network(x.chain.chainId)) : null;
  const facilitator = x && x402 && d.config.facilitatorKey ? new x402.Facilitator(x, d.config.facilitatorKey, d.config.settleTimeoutMs) : null;
  const deps = { db: d.db, clock: d.clock, identity: d.identity, passports: d.passports, config: d.config, self: d.self, terms, facilitator };
  return { service: new ServicesService(deps), invoker: new Invoker({ ...deps, agents: d.agents, signer: d.signer, sealKey: d.sealKey }) };
}
