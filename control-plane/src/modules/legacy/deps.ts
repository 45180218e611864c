import { LegacyLifecycle } from './lifecycle.ts';
import { LegacyParties } from './parties.ts';
import { LegacyService, type LegacyDeps } from './service.ts';

/** Legacy plans: the owner's service, the attesters' and beneficiaries' side, and the leader's lifecycle loop. */
export interface Legacy {
  service: LegacyService;
  parties: LegacyParties;
  lifecycle: LegacyLifecycle;
}

export function createLegacy(d: LegacyDeps): Legacy {
  const service = new LegacyService(d);
  return { service, parties: new LegacyParties(service), lifecycle: new LegacyLifecycle(service) };
}
