import { ServiceError, type Clock } from '@svc/shared';
import type { InferenceConfig, ModelPrice, ProviderConfig } from '../../config.ts';
import type { NodeRegistry } from '../../fleet/registry.ts';
import { isEligible } from '../../fleet/scheduler.ts';

/** Where a request for a model can go, resolved per request. */
export interface ResolvedModel {
  id: string;
  /** The configured upstream provider serving it, with its price, if any. */
  provider: { config: ProviderConfig; price: ModelPrice } | null;
  /** Eligible inference nodes serving it now (node id -> local model name) with the node price; null when none. */
  nodes: { localModels: Record<string, string>; price: ModelPrice } | null;
}

/** The price a hold assumes before the route is known: the dearer of the two. */
export function holdPrice(m: ResolvedModel): ModelPrice {
  const a = m.nodes?.price;
  const b = m.provider?.price;
  if (!a) return b!;
  if (!b) return a;
  return {
    ...b,
    inputMicroUsdPerMtok: Math.max(a.inputMicroUsdPerMtok, b.inputMicroUsdPerMtok),
    outputMicroUsdPerMtok: Math.max(a.outputMicroUsdPerMtok, b.outputMicroUsdPerMtok),
    maxOutputTokens: a.maxOutputTokens === null || b.maxOutputTokens === null ? null : Math.max(a.maxOutputTokens, b.maxOutputTokens),
  };
}

export interface CatalogEntry {
  id: string;
  object: 'model';
  created: number;
  owned_by: string;
  pricing: { input_micro_usd_per_mtok: number; output_micro_usd_per_mtok: number };
}

/**
 * The model catalog: models of configured providers, and models declared by eligible (approved, online,
 * not disabled or draining) inference nodes that SVC_NODE_MODEL_PRICES prices. A model with neither is
 * not listed and not served. A model both at a provider and priced for nodes goes to an eligible node
 * when there is one (at the node price), else to the provider (at the provider price).
 */
export class ModelCatalog {
  private readonly byProvider = new Map<string, { config: ProviderConfig; price: ModelPrice }>();
  private readonly created: number;

  constructor(
    private readonly cfg: InferenceConfig,
    private readonly registry: NodeRegistry,
    private readonly clock: Clock,
  ) {
    for (const config of cfg.providers) for (const m of config.models) this.byProvider.set(m.id, { config, price: m });
    this.created = Math.floor(clock.now().getTime() / 1000);
  }

  /** Priced node models with eligible nodes: model -> (node id -> local name). */
  private async eligibleNodes(only?: string): Promise<Map<string, Record<string, string>>> {
    const now = this.clock.now();
    const out = new Map<string, Record<string, string>>();
    for (const n of await this.registry.snapshots()) {
      for (const model of n.models) {
        if (!this.cfg.nodeModelPrices[model] || (only !== undefined && model !== only)) continue;
        if (!isEligible(n, { kind: 'inference', model }, now)) continue;
        const m = out.get(model) ?? {};
        m[n.id] = n.modelMap[model] ?? model;
        out.set(model, m);
      }
    }
    return out;
  }

  async list(): Promise<CatalogEntry[]> {
    const nodes = Object.keys(this.cfg.nodeModelPrices).length ? await this.eligibleNodes() : new Map<string, Record<string, string>>();
    const entry = (id: string, owner: string, p: ModelPrice): CatalogEntry => ({
      id,
      object: 'model',
      created: this.created,
      owned_by: owner,
      pricing: { input_micro_usd_per_mtok: p.inputMicroUsdPerMtok, output_micro_usd_per_mtok: p.outputMicroUsdPerMtok },
    });
    const out: CatalogEntry[] = [];
    for (const [id, { config, price }] of this.byProvider) if (!nodes.has(id)) out.push(entry(id, config.name, price));
    for (const id of nodes.keys()) out.push(entry(id, 'fleet', this.cfg.nodeModelPrices[id]!));
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Resolves a requested model for chat or embeddings; unknown or unavailable models are 404, the wrong kind 400. */
  async resolve(id: string, use: 'chat' | 'embeddings'): Promise<ResolvedModel> {
    const provider = this.byProvider.get(id) ?? null;
    const nodePrice = this.cfg.nodeModelPrices[id];
    const localModels = nodePrice ? (await this.eligibleNodes(id)).get(id) : undefined;
    const nodes = nodePrice && localModels ? { localModels, price: nodePrice } : null;
    if (!provider && !nodes) {
      throw new ServiceError('not_found', `The model "${id}" does not exist or is not available now; GET /v1/models lists the models served`, { param: 'model', code: 'model_not_found' });
    }
    const embedding = (provider?.price ?? nodes!.price).embedding;
    if (use === 'chat' && embedding) throw new ServiceError('invalid_request', `The model "${id}" is an embeddings model; use POST /v1/embeddings`, { param: 'model' });
    if (use === 'embeddings' && !embedding) throw new ServiceError('invalid_request', `The model "${id}" is not an embeddings model`, { param: 'model' });
    return { id, provider, nodes };
  }
}
