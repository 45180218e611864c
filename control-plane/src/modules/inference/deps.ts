import type { Clock } from '@svc/shared';
import type { InferenceConfig } from '../../config.ts';
import type { AgentHub } from '../../fleet/hub.ts';
import type { NodeRegistry } from '../../fleet/registry.ts';
import type { Metering } from '../money/metering.ts';
import { InferenceBackends } from './backends.ts';
import { ModelCatalog } from './catalog.ts';
import { InferenceService } from './service.ts';
import { ProviderClient } from './upstream.ts';

/** Wires the inference module: catalog, backends (fleet nodes and providers) and the metered service. */
export function createInference(cfg: InferenceConfig, d: { hub: AgentHub; registry: NodeRegistry; metering: Metering; clock: Clock }): InferenceService {
  const catalog = new ModelCatalog(cfg, d.registry, d.clock);
  const backends = new InferenceBackends(d.hub, new ProviderClient(cfg.timeoutMs), cfg.timeoutMs, cfg.maxStreamMs);
  return new InferenceService(catalog, backends, d.metering, cfg);
}
